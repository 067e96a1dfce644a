// Command pause is the pod sandbox process of the test cluster's pause image:
// it sleeps until SIGINT or SIGTERM, and reaps the children it inherits as a
// PID namespace's init, like the C pause of registry.k8s.io/pause.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	// As the C pause: -v prints the version and exits. kubeadm upgrade's
	// CreateJob health check runs the pause image with -v and waits for
	// the Job to complete.
	if len(os.Args) > 1 && strings.EqualFold(os.Args[1], "-v") {
		fmt.Println("pause (yurtdns test tools)")
		return
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	children := make(chan os.Signal, 8)
	signal.Notify(children, syscall.SIGCHLD)
	for {
		select {
		case <-stop:
			os.Exit(0)
		case <-children:
			for {
				pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
		}
	}
}
