package yurthosts

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"
	clog "github.com/coredns/coredns/plugin/pkg/log"
	"k8s.io/apimachinery/pkg/util/validation"
)

var log = clog.NewWithPlugin(pluginName)

func init() { plugin.Register(pluginName, setup) }

func setup(c *caddy.Controller) error {
	y, err := parse(c)
	if err != nil {
		return plugin.Error(pluginName, err)
	}
	client, err := y.source.client()
	if err != nil {
		return plugin.Error(pluginName, err)
	}
	y.watcher = newWatcher(y.source, client, y.records.Store)

	c.OnStartup(func() error {
		y.watcher.start()
		y.watcher.waitForSync(y.startupTimeout)
		return nil
	})
	c.OnShutdown(func() error {
		y.watcher.stop()
		return nil
	})

	dnsserver.GetConfig(c).AddPlugin(func(next plugin.Handler) plugin.Handler {
		y.Next = next
		return y
	})
	return nil
}

// parse reads the yurthosts block. Errors name the option and, through the
// controller, the Corefile line.
func parse(c *caddy.Controller) (*YurtHosts, error) {
	y := newYurtHosts()
	y.source = source{
		configMapNamespace: tunnelnodes.Namespace,
		configMapName:      tunnelnodes.ConfigMapName,
		configMapKey:       tunnelnodes.ConfigMapKey,
		serviceNamespace:   tunnelnodes.Namespace,
		serviceName:        tunnelnodes.ServiceName,
	}
	i := 0
	for c.Next() {
		if i > 0 {
			return nil, plugin.ErrOnce
		}
		i++
		y.Zones = plugin.OriginsFromArgsOrServerBlock(c.RemainingArgs(), c.ServerBlockKeys)

		for c.NextBlock() {
			option := c.Val()
			args := c.RemainingArgs()
			var err error
			switch option {
			case "configmap":
				if len(args) < 1 || len(args) > 2 {
					return nil, c.Errf("configmap needs NAMESPACE/NAME [KEY]")
				}
				y.source.configMapNamespace, y.source.configMapName, err = objectRef(args[0])
				if err == nil && len(args) == 2 {
					y.source.configMapKey = args[1]
					if errs := validation.IsConfigMapKey(args[1]); len(errs) > 0 {
						err = fmt.Errorf("key %q: %s", args[1], strings.Join(errs, "; "))
					}
				}
			case "shards":
				if len(args) != 1 {
					return nil, c.Errf("shards needs NAMESPACE")
				}
				y.source.shardsNamespace = args[0]
				if errs := validation.IsDNS1123Label(args[0]); len(errs) > 0 {
					err = fmt.Errorf("namespace %q: %s", args[0], strings.Join(errs, "; "))
				}
			case "service":
				if len(args) != 1 {
					return nil, c.Errf("service needs NAMESPACE/NAME or none")
				}
				if args[0] == "none" {
					y.source.serviceNamespace, y.source.serviceName = "", ""
				} else {
					y.source.serviceNamespace, y.source.serviceName, err = objectRef(args[0])
				}
			case "kubeconfig":
				if len(args) < 1 || len(args) > 2 {
					return nil, c.Errf("kubeconfig needs PATH [CONTEXT]")
				}
				y.source.kubeconfig = args[0]
				if len(args) == 2 {
					y.source.kubeContext = args[1]
				}
			case "yurthub":
				if len(args) > 2 {
					return nil, c.Errf("yurthub takes [PROXY_URL [HEALTHZ_URL]]")
				}
				y.source.yurthubProxy, y.source.yurthubHealthz = defaultYurthubProxy, defaultYurthubHealthz
				if len(args) > 0 {
					y.source.yurthubProxy, err = httpURL(args[0])
				}
				if err == nil && len(args) > 1 {
					y.source.yurthubHealthz, err = httpURL(args[1])
				}
			case "ttl":
				if len(args) != 1 {
					return nil, c.Errf("ttl needs SECONDS")
				}
				ttl, perr := strconv.Atoi(args[0])
				if perr != nil || ttl < 0 || ttl > 3600 {
					return nil, c.Errf("ttl %q: must be a whole number of seconds from 0 to 3600", args[0])
				}
				y.ttl = uint32(ttl)
			case "no_reverse":
				if len(args) != 0 {
					return nil, c.Errf("no_reverse takes no arguments")
				}
				y.noReverse = true
			case "fallthrough":
				y.Fall.SetZonesFromArgs(args)
			case "startup_timeout":
				if len(args) != 1 {
					return nil, c.Errf("startup_timeout needs a DURATION")
				}
				d, perr := time.ParseDuration(args[0])
				if perr != nil || d < 0 {
					return nil, c.Errf("startup_timeout %q: must be a non-negative duration such as 5s", args[0])
				}
				y.startupTimeout = d
			default:
				return nil, c.Errf("unknown property %q", option)
			}
			if err != nil {
				return nil, c.Errf("%s: %v", option, err)
			}
		}
	}
	if y.source.shardsNamespace != "" {
		if y.source.shardsNamespace == y.source.configMapNamespace {
			return nil, c.Errf("shards: namespace %s holds the ConfigMap; shards need a namespace of their own", y.source.shardsNamespace)
		}
		if err := tunnelnodes.ValidShardsOf(y.source.configMapName); err != nil {
			return nil, c.Errf("configmap: %v", err)
		}
	}
	return y, nil
}

// httpURL validates an http or https URL with a host and neither
// credentials nor a query.
func httpURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return "", fmt.Errorf("%q is not an http(s)://HOST[:PORT][/PATH] URL", raw)
	}
	return raw, nil
}

// objectRef splits and validates NAMESPACE/NAME.
func objectRef(ref string) (namespace, name string, err error) {
	namespace, name, ok := strings.Cut(ref, "/")
	if !ok || namespace == "" || name == "" {
		return "", "", fmt.Errorf("%q is not NAMESPACE/NAME", ref)
	}
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return "", "", fmt.Errorf("namespace %q: %s", namespace, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return "", "", fmt.Errorf("name %q: %s", name, strings.Join(errs, "; "))
	}
	return namespace, name, nil
}
