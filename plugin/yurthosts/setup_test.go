package yurthosts

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin/pkg/fall"
)

func TestParse(t *testing.T) {
	defaults := source{configMapNamespace: "kube-system", configMapName: "yurt-tunnel-nodes", configMapKey: "tunnel-nodes",
		serviceNamespace: "kube-system", serviceName: "x-tunnel-server-internal-svc"}
	tests := []struct {
		input      string
		wantSource source
		wantZones  []string
		check      func(*YurtHosts) string
	}{
		{input: "yurthosts", wantSource: defaults, wantZones: []string{"."},
			check: func(y *YurtHosts) string {
				if y.ttl != 5 || y.startupTimeout != 5*time.Second || y.noReverse || !y.Fall.Equal(fall.Zero) {
					return "defaults wrong"
				}
				return ""
			}},
		{input: "yurthosts edge.example. {\n fallthrough\n}", wantSource: defaults, wantZones: []string{"edge.example."},
			check: func(y *YurtHosts) string {
				if !y.Fall.Equal(fall.Root) {
					return "fallthrough not set"
				}
				return ""
			}},
		{input: `yurthosts {
			configmap edge/edge-tunnel-nodes nodes
			service edge/x-raven-proxy-internal-svc
			kubeconfig /etc/kubeconfig ctx-1
			ttl 0
			no_reverse
			fallthrough cluster.local
			startup_timeout 250ms
		}`,
			wantSource: source{configMapNamespace: "edge", configMapName: "edge-tunnel-nodes", configMapKey: "nodes",
				serviceNamespace: "edge", serviceName: "x-raven-proxy-internal-svc", kubeconfig: "/etc/kubeconfig", kubeContext: "ctx-1"},
			wantZones: []string{"."},
			check: func(y *YurtHosts) string {
				if y.ttl != 0 || !y.noReverse || y.startupTimeout != 250*time.Millisecond || !y.Fall.Equal(fall.F{Zones: []string{"cluster.local."}}) {
					return "options not applied"
				}
				return ""
			}},
		{input: "yurthosts {\n shards yurtdns-records\n}",
			wantSource: source{configMapNamespace: "kube-system", configMapName: "yurt-tunnel-nodes", configMapKey: "tunnel-nodes",
				shardsNamespace: "yurtdns-records", serviceNamespace: "kube-system", serviceName: "x-tunnel-server-internal-svc"},
			wantZones: []string{"."}},
		{input: "yurthosts {\n yurthub\n}",
			wantSource: source{configMapNamespace: "kube-system", configMapName: "yurt-tunnel-nodes", configMapKey: "tunnel-nodes",
				serviceNamespace: "kube-system", serviceName: "x-tunnel-server-internal-svc",
				yurthubProxy: "http://127.0.0.1:10261", yurthubHealthz: "http://127.0.0.1:10267/v1/healthz"},
			wantZones: []string{"."}},
		{input: "yurthosts {\n yurthub http://169.254.2.1:10261\n}",
			wantSource: source{configMapNamespace: "kube-system", configMapName: "yurt-tunnel-nodes", configMapKey: "tunnel-nodes",
				serviceNamespace: "kube-system", serviceName: "x-tunnel-server-internal-svc",
				yurthubProxy: "http://169.254.2.1:10261", yurthubHealthz: "http://127.0.0.1:10267/v1/healthz"},
			wantZones: []string{"."}},
		{input: "yurthosts {\n kubeconfig /k\n yurthub http://127.0.0.1:1 https://[::1]:2/v1/healthz\n}",
			wantSource: source{configMapNamespace: "kube-system", configMapName: "yurt-tunnel-nodes", configMapKey: "tunnel-nodes",
				serviceNamespace: "kube-system", serviceName: "x-tunnel-server-internal-svc", kubeconfig: "/k",
				yurthubProxy: "http://127.0.0.1:1", yurthubHealthz: "https://[::1]:2/v1/healthz"},
			wantZones: []string{"."}},
		{input: "yurthosts {\n service none\n}",
			wantSource: source{configMapNamespace: "kube-system", configMapName: "yurt-tunnel-nodes", configMapKey: "tunnel-nodes"},
			wantZones:  []string{"."}},
	}
	for _, tc := range tests {
		c := caddy.NewTestController("dns", tc.input)
		c.ServerBlockKeys = []string{".:53"}
		y, err := parse(c)
		if err != nil {
			t.Errorf("%q: unexpected error %v", tc.input, err)
			continue
		}
		if y.source != tc.wantSource {
			t.Errorf("%q: source = %+v, want %+v", tc.input, y.source, tc.wantSource)
		}
		if strings.Join(y.Zones, ",") != strings.Join(tc.wantZones, ",") {
			t.Errorf("%q: zones = %v, want %v", tc.input, y.Zones, tc.wantZones)
		}
		if tc.check != nil {
			if msg := tc.check(y); msg != "" {
				t.Errorf("%q: %s", tc.input, msg)
			}
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ input, wantErr string }{
		{"yurthosts {\n ttl 3601\n}", "ttl"},
		{"yurthosts {\n ttl -1\n}", "ttl"},
		{"yurthosts {\n ttl\n}", "ttl"},
		{"yurthosts {\n configmap kube-system\n}", "configmap"},
		{"yurthosts {\n configmap Kube_System/x\n}", "configmap: namespace"},
		{"yurthosts {\n configmap a/b c d\n}", "configmap"},
		{"yurthosts {\n configmap a/b bad/key\n}", "configmap: key"},
		{"yurthosts {\n service\n}", "service"},
		{"yurthosts {\n service a/B_ad\n}", "service: name"},
		{"yurthosts {\n kubeconfig\n}", "kubeconfig"},
		{"yurthosts {\n shards\n}", "shards needs NAMESPACE"},
		{"yurthosts {\n shards a b\n}", "shards needs NAMESPACE"},
		{"yurthosts {\n shards Records\n}", "shards: namespace"},
		{"yurthosts {\n shards kube-system\n}", "shards need a namespace of their own"},
		{"yurthosts {\n configmap a/" + strings.Repeat("n", 250) + "\n shards r\n}", "too long to name its shards"},
		{"yurthosts {\n no_reverse yes\n}", "no_reverse"},
		{"yurthosts {\n yurthub http://a http://b http://c\n}", "yurthub takes"},
		{"yurthosts {\n yurthub 127.0.0.1:10261\n}", "yurthub:"},
		{"yurthosts {\n yurthub unix:///run/yurthub.sock\n}", "yurthub:"},
		{"yurthosts {\n yurthub http://:10261\n}", "yurthub:"},
		{"yurthosts {\n yurthub http://user:pw@127.0.0.1:10261\n}", "yurthub:"},
		{"yurthosts {\n yurthub http://127.0.0.1:10261 http://127.0.0.1:10267/v1/healthz?x=1\n}", "yurthub:"},
		{"yurthosts {\n yurthub http://127.0.0.1:10261 %zz\n}", "yurthub:"},
		{"yurthosts {\n startup_timeout soon\n}", "startup_timeout"},
		{"yurthosts {\n startup_timeout -1s\n}", "startup_timeout"},
		{"yurthosts {\n reload 1s\n}", `unknown property "reload"`},
		{"yurthosts\nyurthosts", "once"},
	}
	for _, tc := range tests {
		_, err := parse(caddy.NewTestController("dns", tc.input))
		if err == nil {
			t.Errorf("%q: want an error", tc.input)
			continue
		}
		if !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%q: error %q does not mention %q", tc.input, err, tc.wantErr)
		}
	}
	// The error names the Corefile line.
	_, err := parse(caddy.NewTestController("dns", "yurthosts {\n fallthrough\n ttl 99999\n}"))
	if err == nil || !strings.Contains(err.Error(), ":3 ") {
		t.Errorf("error %q does not name line 3", err)
	}
}

// FuzzParse feeds arbitrary Corefile text to the option parser: it must
// return a plugin or an error, never panic.
// Seeds: testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, input string) {
		y, err := parse(caddy.NewTestController("dns", input))
		if err == nil && y == nil {
			t.Fatal("nil plugin without error")
		}
		if err == nil && y.ttl > 3600 {
			t.Fatalf("ttl %d accepted", y.ttl)
		}
		if err == nil && y.source.yurthubProxy != "" {
			for _, raw := range []string{y.source.yurthubProxy, y.source.yurthubHealthz} {
				if u, perr := url.Parse(raw); perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.User != nil {
					t.Fatalf("yurthub URL %q accepted", raw)
				}
			}
		}
	})
}
