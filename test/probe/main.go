// Command probe is the tests' own workload on the real kubeadm cluster:
// what the cluster's users would run at both ends of the tunnel.
//
//	probe exporter --addr :9100 --name worker-1   (a TLS "node exporter": /metrics, naming the peer that connected)
//	probe fetch    URL                            (GET, any certificate; prints the body)
//	probe watch-dns --server IP:53 --names a,b,... --want IP
//	                (asks for each name in turn every 10 ms; prints "NAME UNIXNANO" when it answers want)
//	probe node [--stay]                           (prints "running on node $NODE_NAME"; --stay: then sleeps)
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: probe exporter|fetch|watch-dns|node ...")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "exporter":
		err = exporter(os.Args[2:])
	case "fetch":
		err = fetch(os.Args[2:])
	case "watch-dns":
		err = watchDNS(os.Args[2:])
	case "node":
		// What kubectl logs and exec show of a pod: the node it runs on
		// (NODE_NAME, from the downward API), so a request that reached the
		// wrong node shows it.
		fmt.Printf("running on node %s\n", os.Getenv("NODE_NAME"))
		if slices.Contains(os.Args[2:], "--stay") {
			stop := make(chan os.Signal, 1)
			signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
			<-stop
		}
	default:
		err = fmt.Errorf("unknown subcommand %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(1)
	}
}

// exporter serves /metrics over TLS with a throwaway self-signed certificate.
func exporter(args []string) error {
	fs := flag.NewFlagSet("exporter", flag.ExitOnError)
	addr := fs.String("addr", ":9100", "listen address")
	name := fs.String("name", "", "the node's name, in the metric")
	fs.Parse(args)
	cert, err := selfSigned(*name)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		// Who connected tells a test which way the request came: through the
		// tunnel, the agent on this node dials it.
		peer, _, _ := net.SplitHostPort(r.RemoteAddr)
		fmt.Fprintf(w, "probe_exporter_up{node=%q,peer=%q} 1\n", *name, peer)
	})
	srv := &http.Server{Addr: *addr, Handler: mux, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}}
	return srv.ListenAndServeTLS("", "")
}

func fetch(args []string) error {
	if len(args) != 1 {
		return errors.New("usage: fetch URL")
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		// The exporter's certificate is a throwaway; what is tested is the route.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
	}}
	resp, err := client.Get(args[0])
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	fmt.Print(string(body))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", args[0], resp.Status)
	}
	return nil
}

// watchDNS asks server for each name in turn until it answers want, and
// prints when: a benchmark's client, seeing the change from a pod.
func watchDNS(args []string) error {
	fs := flag.NewFlagSet("watch-dns", flag.ExitOnError)
	server := fs.String("server", "", "DNS server, IP:53")
	names := fs.String("names", "", "names to wait for, in order, comma separated")
	want := fs.String("want", "", "the address each name must answer")
	fs.Parse(args)
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, *server)
	}}
	for _, name := range strings.Split(*names, ",") {
		for {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			addrs, _ := r.LookupHost(ctx, name+".")
			cancel()
			if slices.Contains(addrs, *want) {
				fmt.Printf("%s %d\n", name, time.Now().UnixNano())
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return nil
}
