// Package realcluster proves install, revert, the image swap and node-name
// DNS on the real kubeadm cluster of test/cluster (three control-plane
// nodes behind a load balancer, edge nodes in two NAT'd sites): a kubelet runs
// the pods, kube-proxy programs the Services, the kubelet restarts the
// patched static pods. The tests share one cluster and run in order; each
// leaves it as kubeadm made it.
package realcluster

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/test/cluster"
	"github.com/yurtdns/yurtdns/test/harness"

	"k8s.io/client-go/kubernetes"
)

var (
	kc *cluster.Cluster
	cs kubernetes.Interface
	// syncBin is make build's tunnel-nodes-sync: its default image flags name
	// the images make image wrote for the same version.
	syncBin string
	// startedAt is when the cluster began to come up, upTime how long it took.
	startedAt time.Time
	upTime    time.Duration
)

func TestMain(m *testing.M) {
	if os.Geteuid() != 0 {
		fmt.Println("realcluster: skipped, the kubeadm cluster needs root")
		os.Exit(0)
	}
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) (code int) {
	root, err := harness.RepoRoot()
	if err != nil {
		fmt.Println(err)
		return 1
	}
	if err := testsBeforeFailed(); err != nil {
		fmt.Println("realcluster:", err)
		return 1
	}
	bin := filepath.Join(root, "bin")
	images := []string{filepath.Join(bin, "coredns-yurt.oci.tar"), filepath.Join(bin, "tunnel-nodes-sync.oci.tar")}
	syncBin = filepath.Join(bin, "tunnel-nodes-sync")
	for _, f := range append(images, syncBin) {
		if _, err := os.Stat(f); err != nil {
			fmt.Printf("realcluster: %v (make test runs make image first)\n", err)
			return 1
		}
	}
	// The upgrade test, first, moves it to cluster.KubernetesVersion; the
	// benchmarks alone (make bench) run on that version from the start.
	start, run := cluster.PreviousKubernetesVersion, flag.Lookup("test.run").Value.String()
	if run == "^$" {
		start = cluster.KubernetesVersion
		if regexp.MustCompile(flag.Lookup("test.bench").Value.String()).MatchString("BenchmarkUpgradeFromEarlier") {
			// Its earlier yurtdns builds while the cluster starts.
			earlierDir, err := os.MkdirTemp(bin, "earlier-")
			if err != nil {
				fmt.Println(err)
				return 1
			}
			defer os.RemoveAll(earlierDir)
			go func() {
				e, err := buildEarlier(root, earlierDir)
				earlier <- earlierResult{e, err}
			}()
		}
	} else if topLevel, _, _ := strings.Cut(run, "/"); regexp.MustCompile(topLevel).MatchString("TestKubeadmUpgrade") {
		build, err := startMonitoringBuild(root)
		if err != nil {
			fmt.Println(err)
			return 1
		}
		defer build.stop()
	} else {
		// What else would wait on it fails instead of waiting forever.
		monitoringBuilt <- fmt.Errorf("make monitoring was not started: -run %q does not name TestKubeadmUpgrade", run)
	}
	startedAt = time.Now()
	kc, err = cluster.Start(context.Background(), cluster.Config{
		Dir: filepath.Join(bin, "cluster"), Bin: filepath.Join(bin, "k8s"), Images: images, Log: os.Stdout,
		StartVersion: start,
	})
	if err != nil {
		fmt.Println("realcluster: starting the kubeadm cluster:", err)
		return 1
	}
	upTime = time.Since(startedAt)
	defer func() {
		if err := kc.Stop(); err != nil {
			fmt.Println("realcluster: tearing the cluster down:", err)
			code = 1
		} else if err := kc.Leftovers(); err != nil {
			fmt.Println("realcluster: the cluster's teardown left:", err)
			code = 1
		}
	}()
	if cs, err = kc.Clientset(); err != nil {
		fmt.Println(err)
		return 1
	}
	if err := kc.ImportProbe(root); err != nil {
		fmt.Println(err)
		return 1
	}
	if err := waitForTestsBefore(); err != nil {
		fmt.Println("realcluster:", err)
		return 1
	}
	return m.Run()
}

// make test starts the cluster beside its last tests that time no answer;
// YURTDNS_TESTS_AFTER names the file their exit status goes to. These
// tests time answers: they wait for that status, and are not run after a
// failure.
const testsAfterEnv = "YURTDNS_TESTS_AFTER"

// testsBeforeFailed says whether the tests before already failed.
func testsBeforeFailed() error {
	file := os.Getenv(testsAfterEnv)
	if file == "" {
		return nil
	}
	status, err := os.ReadFile(file)
	if err != nil || strings.TrimSpace(string(status)) == "0" {
		return nil
	}
	return fmt.Errorf("the tests before failed (exit %s): the real-cluster tests are not run", strings.TrimSpace(string(status)))
}

// waitForTestsBefore waits for the tests before to end.
func waitForTestsBefore() error {
	file := os.Getenv(testsAfterEnv)
	if file == "" {
		return nil
	}
	started := time.Now()
	for {
		status, err := os.ReadFile(file)
		if err == nil && strings.TrimSpace(string(status)) != "" {
			fmt.Printf("realcluster: waited %s for the tests before\n", time.Since(started).Round(time.Second))
			return testsBeforeFailed()
		}
		time.Sleep(2 * time.Second)
	}
}
