package corefile

import (
	"strings"
	"testing"

	"github.com/coredns/caddy/caddyfile"
)

// kubeadmCorefile is the Corefile kubeadm writes.
const kubeadmCorefile = `.:53 {
    errors
    health {
       lameduck 5s
    }
    ready
    kubernetes cluster.local in-addr.arpa ip6.arpa {
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }
    prometheus :9153
    forward . /etc/resolv.conf {
       max_concurrent 1000
    }
    cache 30 {
       disable success cluster.local
       disable denial cluster.local
    }
    loop
    reload
    loadbalance
}
`

// openYurtCorefile is kubeadm's with the hosts block OpenYurt's manual
// setup adds, a comment, and a second server block.
const openYurtCorefile = `# managed by hand
.:53 {
    errors
    health {
       lameduck 5s
    }
    ready
    hosts /etc/edge/tunnel-nodes { # tunnel nodes
        reload 300ms
        fallthrough
    }
    kubernetes cluster.local in-addr.arpa ip6.arpa {
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }
    forward . /etc/resolv.conf
}
example.org:53 {
    hosts /etc/edge/tunnel-nodes
    forward . 8.8.8.8
}
`

func TestEnsureYurthosts(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"kubeadm: before kubernetes", kubeadmCorefile, strings.Replace(kubeadmCorefile,
			"    kubernetes cluster.local", "    yurthosts {\n        shards yurtdns-records\n        fallthrough\n    }\n    kubernetes cluster.local", 1)},
		// The whole hosts block goes (its comment too: revert restores it);
		// the other server block's hosts line is not the .:53 one.
		{"openyurt: hosts block replaced, rest byte-identical", openYurtCorefile, strings.Replace(openYurtCorefile,
			"hosts /etc/edge/tunnel-nodes { # tunnel nodes\n        reload 300ms\n        fallthrough\n    }",
			"yurthosts {\n        shards yurtdns-records\n        fallthrough\n    }", 1)},
		{"one-line blocks and tabs", ".:53 {\n\terrors\n\tlog . { class denial success }\n\tkubernetes cluster.local { pods insecure }\n}\n",
			".:53 {\n\terrors\n\tlog . { class denial success }\n\tyurthosts {\n\t\tshards yurtdns-records\n\t\tfallthrough\n\t}\n\tkubernetes cluster.local { pods insecure }\n}\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, changed, err := EnsureYurthosts(tc.in, testShardsOption)
			if err != nil {
				t.Fatal(err)
			}
			if !changed || got != tc.want {
				t.Fatalf("changed %v, got:\n%s\nwant:\n%s", changed, got, tc.want)
			}
			// The result is a valid Corefile for CoreDNS's own parser.
			if _, err := caddyfile.Parse("Corefile", strings.NewReader(got), nil); err != nil {
				t.Errorf("CoreDNS cannot parse the result: %v", err)
			}
			// Idempotent: a second edit changes nothing.
			again, changed, err := EnsureYurthosts(got, testShardsOption)
			if err != nil || changed || again != got {
				t.Errorf("second edit: changed %v err %v", changed, err)
			}
		})
	}
}

func TestEnsureYurthostsRefusesUnknownLayouts(t *testing.T) {
	for name, in := range map[string]string{
		"no .:53 block":          "example.org {\n kubernetes cluster.local\n}\n",
		"no kubernetes":          ".:53 {\n forward . /etc/resolv.conf\n}\n",
		"unclosed block":         ".:53 {\n kubernetes cluster.local {\n",
		"unterminated quote":     ".:53 {\n kubernetes \"cluster.local\n}\n",
		"brace without keys":     "{\n}\n",
		"keys without a block":   ".:53\n",
		"brace without a plugin": ".:53 {\n {\n }\n}\n",
		// CoreDNS refuses a '}' on the line a directive ends on.
		"brace after a directive": ". { hosts /etc/edge/tunnel-nodes }\n",
		"brace after a block":     ".:53 {\n kubernetes cluster.local {\n } }\n",
	} {
		if _, _, err := EnsureYurthosts(in, testShardsOption); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
}

// FuzzEnsureYurthosts: any input gives an error or a Corefile that keeps
// the input's text around one edit, is idempotent, and has yurthosts.
func FuzzEnsureYurthosts(f *testing.F) {
	f.Add(kubeadmCorefile)
	f.Add(openYurtCorefile)
	f.Fuzz(func(t *testing.T, in string) {
		out, changed, err := EnsureYurthosts(in, testShardsOption)
		if err != nil {
			return
		}
		if !changed {
			if out != in {
				t.Fatal("unchanged but different")
			}
			return
		}
		if !strings.Contains(out, "yurthosts {") {
			t.Fatal("no yurthosts in the result")
		}
		// What CoreDNS could load before, it can load after.
		if _, err := caddyfile.Parse("in", strings.NewReader(in), nil); err == nil {
			if _, err := caddyfile.Parse("out", strings.NewReader(out), nil); err != nil {
				t.Fatalf("CoreDNS cannot parse the result: %v\n%s", err, out)
			}
		}
		again, changed, err := EnsureYurthosts(out, testShardsOption)
		if err != nil || changed || again != out {
			t.Fatalf("not idempotent: changed %v err %v", changed, err)
		}
	})
}

// testShardsOption is the yurthosts option install writes under yurt-tunnel.
var testShardsOption = []string{"shards yurtdns-records"}

// nodeLocalCorefile is a node-local cache's: kubeadm's kubernetes
// directive as the default, before the cluster's replaces it.
const nodeLocalCorefile = `.:53 {
    bind 169.254.20.10
    yurthosts {
        shards yurtdns-records
        fallthrough
    }
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        startup_timeout 30s
    }
    cache 30
}
`

func TestSetKubernetes(t *testing.T) {
	edge := ".:53 {\n\tkubernetes edge.example in-addr.arpa { pods verified\n\t\tttl 5 }\n\tforward . /etc/resolv.conf\n}\n"
	ours := "    kubernetes cluster.local in-addr.arpa ip6.arpa {\n        pods insecure\n        fallthrough in-addr.arpa ip6.arpa\n        startup_timeout 30s\n    }"
	withKubernetes := func(directive string) string { return strings.Replace(nodeLocalCorefile, ours, directive, 1) }
	tests := []struct {
		name, from, want string
	}{
		{"kubeadm's, with the cache's startup_timeout", kubeadmCorefile, withKubernetes(
			"    kubernetes cluster.local in-addr.arpa ip6.arpa {\n       pods insecure\n       fallthrough in-addr.arpa ip6.arpa\n       ttl 30\n        startup_timeout 30s\n    }")},
		{"another domain and options, byte for byte", edge, withKubernetes(
			"    kubernetes edge.example in-addr.arpa { pods verified\n\t\tttl 5\n        startup_timeout 30s }")},
		{"the cluster's own startup_timeout wins", ".:53 {\n  kubernetes cluster.local {\n    startup_timeout 1m\n  }\n}\n", withKubernetes(
			"    kubernetes cluster.local {\n    startup_timeout 1m\n  }")},
		{"no block", ".:53 {\n  kubernetes cluster.local\n}\n", withKubernetes(
			"    kubernetes cluster.local {\n        startup_timeout 30s\n    }")},
		{"an empty block", ".:53 {\n  kubernetes cluster.local {\n  }\n}\n", withKubernetes(
			"    kubernetes cluster.local {\n        startup_timeout 30s\n    }")},
		{"the cluster's .:53 block has none: the default stays", ".:53 {\n    forward . 192.0.2.53\n}\ncluster.local {\n    kubernetes cluster.local\n}\n", nodeLocalCorefile},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SetKubernetes(nodeLocalCorefile, tc.from)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got:\n%s\nwant:\n%s", got, tc.want)
			}
			if _, err := caddyfile.Parse("Corefile", strings.NewReader(got), nil); err != nil {
				t.Errorf("CoreDNS cannot parse the result: %v", err)
			}
		})
	}
	for name, from := range map[string]string{"unclosed block": ".:53 {\n kubernetes cluster.local {\n", "no .:53 block": "example.org {\n kubernetes cluster.local\n}\n"} {
		if _, err := SetKubernetes(nodeLocalCorefile, from); err == nil {
			t.Errorf("from a Corefile with %s: want an error", name)
		}
	}
	if _, err := SetKubernetes(".:53 {\n    forward . 192.0.2.53\n}\n", kubeadmCorefile); err == nil {
		t.Error("into a Corefile without a kubernetes directive: want an error")
	}
}

// FuzzSetKubernetes: any cluster Corefile gives an error, or a node-local
// Corefile that CoreDNS parses, with one kubernetes directive, and its
// other lines intact.
func FuzzSetKubernetes(f *testing.F) {
	f.Add(kubeadmCorefile)
	f.Add(openYurtCorefile)
	f.Fuzz(func(t *testing.T, from string) {
		out, err := SetKubernetes(nodeLocalCorefile, from)
		if err != nil {
			return
		}
		if _, err := caddyfile.Parse("from", strings.NewReader(from), nil); err == nil {
			if _, err := caddyfile.Parse("out", strings.NewReader(out), nil); err != nil {
				t.Fatalf("CoreDNS cannot parse the result: %v\n%s", err, out)
			}
		}
		blocks, err := parseCorefile(out)
		if err != nil {
			t.Fatalf("the result does not parse: %v\n%s", err, out)
		}
		var names []string
		for _, d := range mainBlock(blocks).directives {
			names = append(names, d.name)
		}
		if want := "bind yurthosts kubernetes cache"; strings.Join(names, " ") != want {
			t.Fatalf("directives %v, want %s:\n%s", names, want, out)
		}
	})
}
