package steps

import "testing"

func TestDisableGatewayDNS(t *testing.T) {
	for in, want := range map[string]string{
		"-nodelifecycle,*":                   "-gateway-dns-controller,-nodelifecycle,*", // the yurt-manager chart's default
		"*":                                  "-gateway-dns-controller,*",
		"-gatewaydns,*":                      "-gatewaydns,*", // off already, by its alias
		"*,-gateway-dns-controller":          "*,-gateway-dns-controller",
		"gatewaydns,-nodelifecycle":          "-gateway-dns-controller,gatewaydns,-nodelifecycle",
		"-gateway-dns-controller,gatewaydns": "-gateway-dns-controller,gatewaydns", // the first entry decides
		"nodepool,gatewaypickup":             "nodepool,gatewaypickup",             // no "*": off
		"":                                   "",
		" gatewaydns,*":                      "-gateway-dns-controller, gatewaydns,*", // pflag trims nothing
		"-gateway-dns-controller-x,*":        "-gateway-dns-controller,-gateway-dns-controller-x,*",
	} {
		if got := disableGatewayDNS(in); got != want {
			t.Errorf("disableGatewayDNS(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzDisableGatewayDNS: the result runs no gateway-dns controller, a second
// application changes nothing, and every entry of the list is kept, in order.
func FuzzDisableGatewayDNS(f *testing.F) {
	for _, s := range []string{"-nodelifecycle,*", "*", "gatewaydns", "-gatewaydns,*", "", ",,*,", "gateway-dns-controller,-*"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, list string) {
		out := disableGatewayDNS(list)
		if gatewayDNSEnabled(out) {
			t.Fatalf("%q -> %q still runs gateway-dns", list, out)
		}
		if again := disableGatewayDNS(out); again != out {
			t.Fatalf("not idempotent: %q -> %q -> %q", list, out, again)
		}
		if out != list && out != "-"+gatewayDNSController+","+list {
			t.Fatalf("%q -> %q: entries changed", list, out)
		}
		if !gatewayDNSEnabled(list) && out != list {
			t.Fatalf("%q runs no gateway-dns but was changed to %q", list, out)
		}
	})
}
