package engine

import (
	"sync"
	"time"
)

// ProgressInterval is how often a long step, or a wait for the apiserver,
// says it is still at it: a silent minute looks hung.
const ProgressInterval = 15 * time.Second

// progressInterval is ProgressInterval, shorter in the unit tests.
var progressInterval = ProgressInterval

// Heartbeat calls say every interval with the time since it was started,
// until stop is called; say is not called after stop returns.
func Heartbeat(interval time.Duration, say func(elapsed time.Duration)) (stop func()) {
	start := time.Now()
	ticker := time.NewTicker(interval)
	done := make(chan struct{})
	var finished sync.WaitGroup
	finished.Add(1)
	go func() {
		defer finished.Done()
		for {
			select {
			case <-done:
				return
			case now := <-ticker.C:
				say(now.Sub(start).Round(time.Second))
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			ticker.Stop()
			close(done)
			finished.Wait()
		})
	}
}
