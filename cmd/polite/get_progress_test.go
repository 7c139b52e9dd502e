package main

import (
	"testing"
	"time"

	"github.com/politehttp/polite/politestatus"
	"github.com/stretchr/testify/assert"
)

// TestGetProgressReason checks the line under get's progress bar: the
// reason of the key that waits most, with its name, read from the
// Transport at most once a second.
func TestGetProgressReason(t *testing.T) {
	t.Run("a page", func(t *testing.T) {
		assert.Empty(t, reasonLine(politestatus.Page{}), "no key")
		assert.Empty(t, reasonLine(politestatus.Page{Top: []politestatus.Key{{Key: "a.test", State: "unthrottled"}}}), "nothing paces it")
		page := topPage()
		assert.Equal(t, "api.example.com/a-very-long-route-name-that-goes-on: paused by the server's Retry-After until 12:03:10; queue of 340 batch calls behind 2 interactive ones", reasonLine(page))
	})

	t.Run("once a second", func(t *testing.T) {
		var reads []time.Time
		page := topPage()
		r := &getReason{status: func(now time.Time, n int, search string) politestatus.Page {
			assert.Equal(t, 1, n, "the key that waits most")
			assert.Empty(t, search)
			reads = append(reads, now)
			return page
		}}
		t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
		want := reasonLine(page)
		assert.Equal(t, want, r.at(t0))
		page.Top = nil // read again, it says nothing waits
		assert.Equal(t, want, r.at(t0.Add(999*time.Millisecond)), "the line read less than a second ago")
		assert.Empty(t, r.at(t0.Add(time.Second)), "a new read")
		assert.Equal(t, []time.Time{t0, t0.Add(time.Second)}, reads)
	})

	t.Run("a Transport", func(t *testing.T) {
		tr := pausedTransport(t)
		r := &getReason{status: tr.Status}
		assert.Regexp(t, `^busy\.test: paused by the server's Retry-After until \d\d:\d\d:\d\d; queue of 2 batch calls behind 1 interactive one$`, r.at(time.Now()))
	})
}
