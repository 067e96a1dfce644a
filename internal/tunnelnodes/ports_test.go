package tunnelnodes

import (
	"reflect"
	"testing"
)

func TestParsePortMappings(t *testing.T) {
	tests := []struct {
		name    string
		data    map[string]string
		want    []PortMapping
		wantBad []string // keys of the bad entries
	}{
		{name: "none", data: map[string]string{}, want: []PortMapping{}},
		{name: "https and http, trimmed, sorted", data: map[string]string{
			HTTPSProxyPortsKey: " 9100 , 9445", HTTPProxyPortsKey: "8080,"},
			want: []PortMapping{{8080, 10264}, {9100, 10263}, {9445, 10263}}},
		{name: "https wins overlap", data: map[string]string{
			HTTPSProxyPortsKey: "9100", HTTPProxyPortsKey: "9100", DNATPortsPairKey: "9100=10264"},
			want: []PortMapping{{9100, 10263}}},
		{name: "legacy pairs", data: map[string]string{DNATPortsPairKey: "9100=10264, 9200 = 10263"},
			want: []PortMapping{{9100, 10264}, {9200, 10263}}},
		{name: "kubelet ports ignored", data: map[string]string{HTTPSProxyPortsKey: "10250,10255,9100"},
			want: []PortMapping{{9100, 10263}}},
		{name: "bad entries skipped, good ones kept", data: map[string]string{
			HTTPSProxyPortsKey: "abc,0,65536,9100", DNATPortsPairKey: "9300,9400=x,=1"},
			want:    []PortMapping{{9100, 10263}},
			wantBad: []string{DNATPortsPairKey, DNATPortsPairKey, DNATPortsPairKey, HTTPSProxyPortsKey, HTTPSProxyPortsKey, HTTPSProxyPortsKey}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, bad := ParsePortMappings(tc.data, DefaultHTTPSTargetPort, DefaultHTTPTargetPort)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("mappings = %v, want %v", got, tc.want)
			}
			var keys []string
			for _, b := range bad {
				keys = append(keys, b.Key)
			}
			if !reflect.DeepEqual(keys, tc.wantBad) {
				t.Errorf("bad = %v, want keys %v", bad, tc.wantBad)
			}
		})
	}
	if got := (PortMapping{Port: 9100}).Name(); got != "dnat-9100" {
		t.Errorf("Name() = %q", got)
	}
}

// FuzzParsePortMappings: any config parses without panic into sorted,
// unique, in-range ports that are never the kubelet ports.
// Seeds: testdata/fuzz/FuzzParsePortMappings.
func FuzzParsePortMappings(f *testing.F) {
	f.Fuzz(func(t *testing.T, https, http, pairs string) {
		got, _ := ParsePortMappings(map[string]string{HTTPSProxyPortsKey: https, HTTPProxyPortsKey: http, DNATPortsPairKey: pairs},
			DefaultHTTPSTargetPort, DefaultHTTPTargetPort)
		for i, m := range got {
			if m.Port < 1 || m.TargetPort < 1 || m.Port == 10250 || m.Port == 10255 {
				t.Fatalf("bad mapping %v", m)
			}
			if i > 0 && got[i-1].Port >= m.Port {
				t.Fatalf("not sorted/unique: %v", got)
			}
		}
	})
}
