package main

import (
	"fmt"
	"os"
	"sync"
)

// demo implements harness.TB for a program: failures print and exit after
// stopping everything; cleanups run last-registered first, once.
type demo struct {
	mu       sync.Mutex
	cleanups []func()
	failed   bool
}

func (d *demo) Helper() {}

func (d *demo) Cleanup(f func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cleanups = append(d.cleanups, f)
}

func (d *demo) TempDir() string {
	dir, err := os.MkdirTemp("", "yurtdns-demo-")
	if err != nil {
		d.Fatal(err)
	}
	d.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func (d *demo) Logf(format string, args ...any) { fmt.Printf("  "+format+"\n", args...) }

func (d *demo) Errorf(format string, args ...any) {
	d.mu.Lock()
	d.failed = true
	d.mu.Unlock()
	fmt.Fprintf(os.Stderr, "error: "+format+"\n", args...)
}

func (d *demo) Fatal(args ...any) { d.Fatalf("%s", fmt.Sprint(args...)) }

func (d *demo) Fatalf(format string, args ...any) {
	d.Errorf(format, args...)
	d.cleanup()
	os.Exit(1)
}

func (d *demo) Failed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.failed
}

// cleanup stops every process and the control plane, newest first.
func (d *demo) cleanup() {
	d.mu.Lock()
	fs := d.cleanups
	d.cleanups = nil
	d.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}
