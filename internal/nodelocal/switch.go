package nodelocal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/google/renameio/v2"
	"github.com/miekg/dns"
)

// KubeletFiles are the kubelet's configuration file and where its original
// is kept while the node is switched (same directory tree, so the original
// goes back with a rename).
type KubeletFiles struct {
	Config, Backup string
}

// NewKubeletFiles are the files under the kubelet's directory as kubeadm
// lays it out (/var/lib/kubelet, or where the Job mounts it).
func NewKubeletFiles(dir string) KubeletFiles {
	return KubeletFiles{Config: filepath.Join(dir, "config.yaml"), Backup: filepath.Join(dir, "yurtdns-backup", "config.yaml")}
}

// SwitchOptions are what the switch of one node needs.
type SwitchOptions struct {
	Files KubeletFiles
	// Addresses are the cache's, one per IP family, the cluster's primary
	// family first: clusterDNS lists them in this order.
	Addresses []netip.Addr
	// Timeout bounds each wait: the address answering, the kubelet back.
	Timeout time.Duration
}

// Switch points the node's kubelet at the node-local cache, only once the
// cache answers a cluster name on each of Addresses: the original file is
// kept in Files.Backup, clusterDNS set to Addresses, the kubelet restarted
// and healthy. A node already switched is left as it is (changed false).
func Switch(ctx context.Context, o SwitchOptions) (changed bool, err error) {
	data, err := os.ReadFile(o.Files.Config)
	if err != nil {
		return false, err
	}
	cfg, err := ParseKubeletConfig(data)
	if err != nil {
		return false, err
	}
	if len(o.Addresses) == 0 {
		return false, errors.New("no node-local address to switch the kubelet to")
	}
	next, changed, err := SetClusterDNS(data, Strings(o.Addresses))
	if err != nil {
		return false, err
	}
	if !changed {
		// Switched already; a switch interrupted before the restart left a
		// kubelet that has not read the file yet.
		stale, err := kubeletOlderThan(o.Files.Config)
		if err != nil || !stale {
			return false, err
		}
		_, err = RestartKubelet(ctx, cfg, o.Timeout)
		return err == nil, err
	}
	name := "kubernetes.default.svc." + cfg.ClusterDomain
	for _, a := range o.Addresses {
		if err := WaitAnswers(ctx, a, name, o.Timeout); err != nil {
			return false, err
		}
	}
	// The backup is the file as it is now (an interrupted switch left the
	// original in place, so rewriting the backup loses nothing), unless the
	// node is switched already, to other node-local addresses (an earlier
	// install's IPv4 one, the cluster dual-stack since): the backup holds
	// the original then.
	keep, err := keepBackup(o.Files.Backup, cfg.ClusterDNS)
	if err != nil {
		return false, err
	}
	if !keep {
		if err := writeAtomic(o.Files.Backup, data); err != nil {
			return false, err
		}
	}
	if err := writeAtomic(o.Files.Config, next); err != nil {
		return false, err
	}
	if _, err := RestartKubelet(ctx, cfg, o.Timeout); err != nil {
		// Like kubeadm upgrade: a kubelet that does not come back on the
		// new file gets the original again.
		_, rerr := Restore(ctx, o.Files, o.Timeout)
		return false, errors.Join(err, rerr)
	}
	return true, nil
}

// keepBackup: a backup is there and clusterDNS (the file's now) names only
// node-local addresses, so the file is switched and the backup is its
// original.
func keepBackup(backup string, clusterDNS []string) (bool, error) {
	if _, err := os.Stat(backup); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	return switchedTo(clusterDNS), nil
}

// switchedTo: clusterDNS is not empty and names node-local addresses only.
func switchedTo(clusterDNS []string) bool {
	for _, s := range clusterDNS {
		a, err := netip.ParseAddr(s)
		if err != nil || a != Address && a != Address6 {
			return false
		}
	}
	return len(clusterDNS) > 0
}

// RestoreOutcome is what Restore did.
type RestoreOutcome int

const (
	// NothingToRestore: no backup (never switched, or restored already).
	NothingToRestore RestoreOutcome = iota
	// Restored: the file is its original again, byte for byte.
	Restored
	// ClusterDNSRestored: the file changed after the switch; only
	// clusterDNS went back to the original's, the later change stays.
	ClusterDNSRestored
)

// Restore puts the node's kubelet back on its original clusterDNS and
// restarts it: the original file comes back as it was when nothing else
// changed it since the switch, else only its clusterDNS does.
func Restore(ctx context.Context, files KubeletFiles, timeout time.Duration) (RestoreOutcome, error) {
	orig, err := os.ReadFile(files.Backup)
	if errors.Is(err, fs.ErrNotExist) {
		return NothingToRestore, nil
	}
	if err != nil {
		return NothingToRestore, err
	}
	data, err := os.ReadFile(files.Config)
	if err != nil {
		return NothingToRestore, err
	}
	was, err := ParseKubeletConfig(orig)
	if err != nil {
		return NothingToRestore, fmt.Errorf("%s: %w", files.Backup, err)
	}
	now, err := ParseKubeletConfig(data)
	if err != nil {
		return NothingToRestore, err
	}
	outcome, next := Restored, orig
	if switched, _, err := SetClusterDNS(orig, now.ClusterDNS); err != nil || !bytes.Equal(switched, data) {
		outcome = ClusterDNSRestored
		if next, _, err = SetClusterDNS(data, was.ClusterDNS); err != nil {
			return NothingToRestore, err
		}
	}
	if !bytes.Equal(next, data) {
		if err := writeAtomic(files.Config, next); err != nil {
			return NothingToRestore, err
		}
		if _, err := RestartKubelet(ctx, was, timeout); err != nil {
			return outcome, err
		}
	}
	// Gone only once the kubelet runs the original: a restore interrupted
	// before that is run again.
	if err := os.Remove(files.Backup); err != nil {
		return outcome, err
	}
	return outcome, nil
}

// WaitAnswers asks server (port 53) for name's A record every half second
// until it answers one (or its AAAA record: on an IPv6-only cluster the
// name has no A record).
func WaitAnswers(ctx context.Context, server netip.Addr, name string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c := &dns.Client{Timeout: time.Second}
	addr := netip.AddrPortFrom(server, 53).String()
	last := "no answer yet"
	for {
		r, _, err := c.ExchangeContext(ctx, new(dns.Msg).SetQuestion(dns.Fqdn(name), dns.TypeA), addr)
		if err == nil && r.Rcode == dns.RcodeSuccess && len(r.Answer) == 0 {
			// NODATA for A: a name of an IPv6-only cluster.
			if r6, _, err6 := c.ExchangeContext(ctx, new(dns.Msg).SetQuestion(dns.Fqdn(name), dns.TypeAAAA), addr); err6 == nil {
				r = r6
			}
		}
		switch {
		case err != nil:
			last = err.Error()
		case r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0:
			last = dns.RcodeToString[r.Rcode] + " with no answer"
		default:
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the node-local cache does not answer %s at %s within %s: %s", name, addr, timeout, last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// writeAtomic replaces path with data through a temporary file in its
// directory (made if missing), keeping the old file's mode.
func writeAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return renameio.WriteFile(path, data, 0o600, renameio.WithTempDir(dir))
}
