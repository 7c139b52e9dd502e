// Package periodic runs a function every little while, on a goroutine of
// its own, until it is stopped: the writers of polite's memory stores.
package periodic

import (
	"sync"
	"time"
)

// Loop calls a function at every tick of a ticker until Stop.
type Loop struct {
	once sync.Once
	stop chan struct{}
	done chan struct{}
}

// Start calls fn every d (d > 0), on a goroutine of its own, until Stop.
func Start(d time.Duration, fn func()) *Loop {
	l := &Loop{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		tick := time.NewTicker(d)
		defer tick.Stop()
		for {
			select {
			case <-l.stop:
				return
			case <-tick.C:
				fn()
			}
		}
	}()
	return l
}

// Stop stops the loop and returns once its goroutine has ended (after the
// call of fn in progress, if any). It may be called more than once.
func (l *Loop) Stop() {
	l.once.Do(func() { close(l.stop) })
	<-l.done
}
