package harness

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"
)

// DigBatch is one dig process in batch mode (dig -f -) asked one query at a
// time. Each query is a lookup of its own, as a new dig's would be: a fresh
// socket and source port, a new TCP connection for +tcp, the options of the
// command line. What it saves is starting dig, about 40 ms of CPU each time:
// a probe asking every 100 ms from a dozen places spends the two cores of a
// test machine on that alone, and starves the cluster it measures.
//
// dig (9.18) times a lookup on its event loop's clock, which stands still
// while dig waits for the next line: after a wait of W a lookup gets its
// +time less W. A caller that wants a timeout T gives dig a longer one and
// counts an answer slower than T, by its own clock, as a failure.
type DigBatch struct {
	command func(args ...string) *exec.Cmd
	options []string
	stopped bool
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	records chan string
	// asked counts the lines written, read the records dig printed.
	asked, read int
}

// digBatchFlush follows each query: dig (9.18) may print a lookup's answer
// only once it has read the line after it, so the query's own answer is out
// as soon as this one, refused at once on the namespace's loopback, is read.
const digBatchFlush = "@127.0.0.1 -p 1 . A"

// digBatchWait bounds how long Ask waits for dig's answer, well past the
// 3 s the probes give dig.
const digBatchWait = 10 * time.Second

// StartDigBatch starts dig in batch mode; command makes the dig command with
// the given arguments (in a network namespace, say). options apply to every
// query ("+time=1", "+tries=1", "+tcp"): dig 9.18 ignores +tcp on a batch
// line, so a probe over both protocols runs a batch for each.
func StartDigBatch(command func(args ...string) *exec.Cmd, options ...string) (*DigBatch, error) {
	args := append([]string{"-f", "-", "+noall", "+comments", "+answer", "+stats"}, options...)
	cmd := command(args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("dig -f -: %w", err)
	}
	b := &DigBatch{command: command, options: options, cmd: cmd, stdin: stdin, records: make(chan string, 16)}
	go b.readRecords(stdout)
	// dig is ready once it has answered a line: the first query's time
	// would otherwise take in starting it (a second and more when a dozen
	// start at once on two busy cores).
	if _, err := b.ask(digBatchFlush+"\n"+digBatchFlush, 2); err != nil {
		b.Close()
		return nil, fmt.Errorf("dig -f - not ready: %w", err)
	}
	return b, nil
}

// readRecords splits dig's output into one record per lookup: an answer
// ends with its statistics' last line, a lookup that got none with dig's
// "no servers could be reached".
func (b *DigBatch) readRecords(stdout io.Reader) {
	defer close(b.records)
	var record strings.Builder
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		line := lines.Text()
		record.WriteString(line + "\n")
		if strings.HasPrefix(line, ";; MSG SIZE") || strings.Contains(line, "no servers could be reached") {
			b.records <- record.String()
			record.Reset()
		}
	}
}

// Ask asks server ("IP", "IP:port" or "[IPv6]:port") for name and qtype,
// and returns what dig answered. An error is a lookup that got no answer,
// or a dig that printed nothing in time: that one is stopped, and the next
// Ask starts another.
func (b *DigBatch) Ask(server, name, qtype string) (DigResult, error) {
	at, err := digServerArgs(server)
	if err != nil {
		return DigResult{}, err
	}
	if b.stopped {
		b.Close()
		next, err := StartDigBatch(b.command, b.options...)
		if err != nil {
			return DigResult{}, err
		}
		*b = *next
	}
	query := strings.Join(append(at, name, qtype), " ")
	record, err := b.ask(query+"\n"+digBatchFlush, 2)
	if err != nil {
		return DigResult{}, fmt.Errorf("dig %s: %w", query, err)
	}
	if strings.Contains(record, "no servers could be reached") {
		return DigResult{Raw: record}, fmt.Errorf("dig %s: %s", query, strings.TrimSpace(record))
	}
	return parseDig(record)
}

// ask writes n lines and returns the record dig printed for the first of
// them (those of lines written before are dropped as they come).
func (b *DigBatch) ask(lines string, n int) (string, error) {
	if _, err := io.WriteString(b.stdin, lines+"\n"); err != nil {
		b.stop()
		return "", fmt.Errorf("writing to dig -f -: %v", err)
	}
	first := b.asked + 1
	b.asked += n
	timeout := time.NewTimer(digBatchWait)
	defer timeout.Stop()
	for {
		select {
		case record, ok := <-b.records:
			if !ok {
				b.stop()
				return "", errors.New("dig -f - exited")
			}
			if b.read++; b.read == first {
				return record, nil
			}
		case <-timeout.C:
			b.stop()
			return "", fmt.Errorf("nothing printed in %s", digBatchWait)
		}
	}
}

// Close ends the batch and waits for dig to exit (its status is the last
// lookup's, the flush's: not an answer).
func (b *DigBatch) Close() error {
	b.stdin.Close()
	done := make(chan error, 1)
	go func() {
		for range b.records {
		}
		done <- b.cmd.Wait()
	}()
	select {
	case err := <-done:
		if _, exited := err.(*exec.ExitError); exited {
			return nil
		}
		return err
	case <-time.After(digBatchWait):
		b.stop()
		return fmt.Errorf("dig -f - did not exit at the end of its input: stopped")
	}
}

// stop kills dig by its PID.
func (b *DigBatch) stop() {
	b.stopped = true
	b.cmd.Process.Kill()
}
