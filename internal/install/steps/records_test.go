package steps

import "testing"

func TestDistinctNames(t *testing.T) {
	for text, want := range map[string]int{
		"":                    0,
		"10.96.0.9\tworker-1": 1,
		"192.0.2.1\tmaster-1\n10.96.0.9\tworker-1\n2001:db8::1\tmaster-1": 2, // dual-stack master-1: two lines
		"192.0.2.1\ta b\n192.0.2.2\tb":                                    2,
	} {
		if got := distinctNames(text); got != want {
			t.Errorf("distinctNames(%q) = %d, want %d", text, got, want)
		}
	}
}
