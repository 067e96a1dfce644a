// Command tunnel-standin is a STAND-IN for yurt-tunnel-server, for the
// tests on the real kubeadm cluster only (yurt-tunnel itself is out of this
// project's scope). It plays the part of the tunnel's cloud end behind
// x-tunnel-server-internal-svc: it accepts what kube-proxy sends to the
// tunnel target ports, learns the node the client dialled — the TLS SNI on
// the https port, the HTTP Host on the http port — and the port it dialled
// (the Service port, from conntrack's original destination, since
// kube-proxy's DNAT rewrote it to the target port), and forwards the raw
// connection to that node's address and port: the client talks to the
// node's server end to end. One exception: kube-apiserver's upgrade path
// (exec, attach, port-forward) sends no SNI when it does not verify kubelet
// certificates (apimachinery's proxy.DialURL with InsecureSkipVerify, the
// kubeadm default); for such a connection the stand-in does what
// yurt-tunnel-server always does — terminates TLS with a throwaway
// certificate the apiserver does not check, reads the node from the HTTP
// Host (or, when that is the apiserver's own address as on the upgrade path,
// from the node of the pod the path names, read from the API), and opens
// TLS to the node's server. It counts every connection per
// node and port, at GET /connections on --stats-addr.
//
// Two more subcommands make the rest of the tests' path:
//
//	tunnel-standin serve    --nodes worker-1=198.51.100.11,... [--https-port 10263] [--http-port 10264] [--stats-addr :10265]
//	tunnel-standin exporter --addr :9100 --name worker-1   (a TLS "node exporter": /metrics)
//	tunnel-standin fetch    URL                            (GET, any certificate; prints the body)
//	tunnel-standin watch-dns --server IP:53 --names a,b,... --want IP
//	                         (asks for each name in turn every 10 ms; prints "NAME UNIXNANO" when it answers want)
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: tunnel-standin serve|exporter|fetch ...")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "exporter":
		err = exporter(os.Args[2:])
	case "fetch":
		err = fetch(os.Args[2:])
	case "watch-dns":
		err = watchDNS(os.Args[2:])
	default:
		err = fmt.Errorf("unknown subcommand %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tunnel-standin:", err)
		os.Exit(1)
	}
}

// forwarder forwards connections to nodes and counts them.
type forwarder struct {
	nodes map[string]string // node name → address
	cert  tls.Certificate   // for clients that name no server
	pods  kubernetes.Interface
	// kubeletClient authenticates the stand-in to a kubelet where it
	// terminated the client's TLS (and with it the client's certificate).
	kubeletClient tls.Certificate

	mu     sync.Mutex
	counts map[string]map[string]int // node → port → connections
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	nodes := fs.String("nodes", "", "node addresses, NAME=IP,...")
	httpsPort := fs.Int("https-port", 10263, "the tunnel's https target port (TLS: node from SNI)")
	httpPort := fs.Int("http-port", 10264, "the tunnel's http target port (node from the Host header)")
	statsAddr := fs.String("stats-addr", ":10265", "GET /connections: connections forwarded per node and port")
	clientCert := fs.String("kubelet-client-cert", "", "client certificate for the kubelets, where TLS is terminated (as the apiserver's kubelet client)")
	clientKey := fs.String("kubelet-client-key", "", "its key")
	fs.Parse(args)
	cert, err := selfSigned("tunnel-standin")
	if err != nil {
		return err
	}
	f := &forwarder{nodes: map[string]string{}, counts: map[string]map[string]int{}, cert: cert}
	if *clientCert != "" {
		if f.kubeletClient, err = tls.LoadX509KeyPair(*clientCert, *clientKey); err != nil {
			return err
		}
	}
	// In a pod, it may look pods up (RBAC: get pods) for the upgrade path.
	if cfg, err := rest.InClusterConfig(); err == nil {
		if f.pods, err = kubernetes.NewForConfig(cfg); err != nil {
			return err
		}
	}
	for _, kv := range strings.Split(*nodes, ",") {
		name, ip, ok := strings.Cut(kv, "=")
		if !ok || net.ParseIP(ip) == nil {
			return fmt.Errorf("--nodes: %q is not NAME=IP", kv)
		}
		f.nodes[name] = ip
	}
	errs := make(chan error, 3)
	for port, nodeOf := range map[int]func(io.Reader) (string, error){*httpsPort: sniNode, *httpPort: hostNode} {
		l, err := net.Listen("tcp", ":"+strconv.Itoa(port))
		if err != nil {
			return err
		}
		go func() { errs <- f.accept(l, nodeOf) }()
	}
	go func() {
		mux := http.NewServeMux()
		mux.HandleFunc("/connections", func(w http.ResponseWriter, _ *http.Request) {
			f.mu.Lock()
			defer f.mu.Unlock()
			json.NewEncoder(w).Encode(f.counts)
		})
		errs <- http.ListenAndServe(*statsAddr, mux)
	}()
	fmt.Println("tunnel-standin: serving")
	return <-errs
}

func (f *forwarder) accept(l net.Listener, nodeOf func(io.Reader) (string, error)) error {
	for {
		conn, err := l.Accept()
		if err != nil {
			return err
		}
		go f.forward(conn.(*net.TCPConn), nodeOf)
	}
}

// forward reads just enough of the client's first bytes to learn the node,
// then replays them to the node and copies both ways.
func (f *forwarder) forward(conn *net.TCPConn, nodeOf func(io.Reader) (string, error)) {
	defer conn.Close()
	port, err := originalPort(conn)
	if err != nil {
		fmt.Println("tunnel-standin: original destination:", err)
		return
	}
	var seen bytes.Buffer
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	node, err := nodeOf(io.TeeReader(conn, &seen))
	conn.SetReadDeadline(time.Time{})
	if errors.Is(err, errNoServerName) {
		f.forwardTerminated(conn, port, seen.Bytes())
		return
	}
	if err != nil {
		fmt.Println("tunnel-standin: which node:", err)
		return
	}
	backend, err := f.dial(conn, node, port, nil)
	if err != nil {
		fmt.Println("tunnel-standin:", err)
		return
	}
	defer backend.Close()
	if _, err := backend.Write(seen.Bytes()); err != nil {
		return
	}
	pipe(conn, backend, conn)
}

// dial opens the connection to node's port (over TLS with tlsConfig when
// not nil) and counts it.
func (f *forwarder) dial(client net.Conn, node string, port int, tlsConfig *tls.Config) (net.Conn, error) {
	host, _, _ := strings.Cut(node, ":")
	ip, ok := f.nodes[host]
	if !ok {
		return nil, fmt.Errorf("unknown node %q", host)
	}
	addr := net.JoinHostPort(ip, strconv.Itoa(port))
	var backend net.Conn
	var err error
	if tlsConfig != nil {
		backend, err = tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, tlsConfig)
	} else {
		backend, err = net.DialTimeout("tcp", addr, 5*time.Second)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %v", host, err)
	}
	f.mu.Lock()
	if f.counts[host] == nil {
		f.counts[host] = map[string]int{}
	}
	f.counts[host][strconv.Itoa(port)]++
	f.mu.Unlock()
	fmt.Printf("tunnel-standin: %s → %s:%d (TLS terminated: %v)\n", client.RemoteAddr(), host, port, tlsConfig != nil)
	return backend, nil
}

// forwardTerminated serves a TLS client that named no server: it replays
// the ClientHello already read into a TLS server with a throwaway
// certificate, reads the request's Host, and relays to the node over TLS.
func (f *forwarder) forwardTerminated(conn *net.TCPConn, port int, hello []byte) {
	server := tls.Server(replayConn{TCPConn: conn, r: io.MultiReader(bytes.NewReader(hello), conn)},
		&tls.Config{Certificates: []tls.Certificate{f.cert}, NextProtos: []string{"http/1.1"}})
	defer server.Close()
	br := bufio.NewReader(server)
	req, err := http.ReadRequest(br)
	if err != nil {
		fmt.Println("tunnel-standin: request without SNI:", err)
		return
	}
	node := req.Host
	if host, _, _ := strings.Cut(node, ":"); f.nodes[host] == "" {
		// The upgrade path keeps the client's Host (the apiserver's own
		// address): the node is the one running the pod the path names.
		if node, err = f.podNode(req.URL.Path); err != nil {
			fmt.Println("tunnel-standin:", err)
			return
		}
	}
	upstream := &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}}
	if f.kubeletClient.Certificate != nil {
		upstream.Certificates = []tls.Certificate{f.kubeletClient}
	}
	backend, err := f.dial(conn, node, port, upstream)
	if err != nil {
		fmt.Println("tunnel-standin:", err)
		return
	}
	defer backend.Close()
	if err := req.Write(backend); err != nil {
		return
	}
	pipe(server, backend, br)
}

// podNode is the node of the pod a kubelet API path names
// (/exec|attach|portForward|containerLogs/NAMESPACE/POD/...), from the API.
func (f *forwarder) podNode(path string) (string, error) {
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	if len(parts) < 3 || f.pods == nil {
		return "", fmt.Errorf("no node for %q", path)
	}
	pod, err := f.pods.CoreV1().Pods(parts[1]).Get(context.Background(), parts[2], metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("the node of %s: %v", path, err)
	}
	return pod.Spec.NodeName, nil
}

// pipe copies both ways until both directions end; from is what the client
// sends (a reader that may hold bytes already buffered).
func pipe(client, backend net.Conn, from io.Reader) {
	done := make(chan struct{}, 2)
	go func() { io.Copy(backend, from); closeWrite(backend); done <- struct{}{} }()
	go func() { io.Copy(client, backend); closeWrite(client); done <- struct{}{} }()
	<-done
	<-done
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
}

// replayConn reads r (bytes already read, then the connection) and writes
// to the connection.
type replayConn struct {
	*net.TCPConn
	r io.Reader
}

func (c replayConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// originalPort is the port the client dialled before kube-proxy's DNAT:
// the Service port, which is the node's port (10250 for the kubelet, 9100
// for an exporter mapped by dnat-9100).
func originalPort(conn *net.TCPConn) (int, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return 0, err
	}
	var port int
	var sockErr error
	err = raw.Control(func(fd uintptr) {
		// struct sockaddr_in fits the 16 bytes of an ipv6_mreq's address.
		m, err := unix.GetsockoptIPv6Mreq(int(fd), unix.IPPROTO_IP, unix.SO_ORIGINAL_DST)
		if err != nil {
			sockErr = err
			return
		}
		port = int(m.Multiaddr[2])<<8 | int(m.Multiaddr[3])
	})
	if err == nil {
		err = sockErr
	}
	return port, err
}

var (
	errHelloRead    = errors.New("client hello read")
	errNoServerName = errors.New("the TLS client named no server")
)

// sniNode reads a TLS ClientHello and returns its server name.
func sniNode(r io.Reader) (string, error) {
	var hello *tls.ClientHelloInfo
	err := tls.Server(readOnlyConn{r: r}, &tls.Config{
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			hello = h
			return nil, errHelloRead
		},
	}).Handshake()
	switch {
	case hello == nil:
		return "", fmt.Errorf("no TLS ClientHello: %v", err)
	case hello.ServerName == "":
		return "", errNoServerName
	}
	return hello.ServerName, nil
}

// hostNode reads an HTTP request head and returns its Host.
func hostNode(r io.Reader) (string, error) {
	req, err := http.ReadRequest(bufio.NewReader(r))
	if err != nil {
		return "", err
	}
	return req.Host, nil
}

// readOnlyConn lets crypto/tls parse a ClientHello without answering it.
type readOnlyConn struct {
	net.Conn
	r io.Reader
}

func (c readOnlyConn) Read(p []byte) (int, error)       { return c.r.Read(p) }
func (c readOnlyConn) Write([]byte) (int, error)        { return 0, io.ErrClosedPipe }
func (c readOnlyConn) Close() error                     { return nil }
func (c readOnlyConn) SetDeadline(time.Time) error      { return nil }
func (c readOnlyConn) SetReadDeadline(time.Time) error  { return nil }
func (c readOnlyConn) SetWriteDeadline(time.Time) error { return nil }
func (c readOnlyConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c readOnlyConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }

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
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "standin_exporter_up{node=%q} 1\n", *name)
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
