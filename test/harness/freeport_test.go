package harness

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
)

// A port FreePort returned is not handed out again, by this process nor by
// another test process running at the same time.
func TestFreePortReservedAcrossProcesses(t *testing.T) {
	if p := os.Getenv("FREEPORT_TEST_RESERVE"); p != "" {
		port, _ := strconv.Atoi(p)
		reserved, err := reservePort(port)
		if err != nil {
			t.Fatal(err)
		}
		if reserved {
			os.Exit(3)
		}
		return
	}
	port := FreePort(t)
	if reserved, err := reservePort(port); err != nil || reserved {
		t.Fatalf("port %d reserved again in the same process: %v %v", port, reserved, err)
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestFreePortReservedAcrossProcesses$")
	cmd.Env = append(os.Environ(), "FREEPORT_TEST_RESERVE="+strconv.Itoa(port))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("another process reserved port %d too (or failed): %v\n%s", port, err, out)
	}
	if other := FreePort(t); other == port {
		t.Fatalf("FreePort returned %d twice", port)
	}
}
