// Package politestatus is what a polite Transport's status handler says,
// as Go types: the JSON that [polite.Transport.StatusHandler] serves, for
// a program that reads it (`polite top` does), and the line in words that
// says why a key waits.
//
// Mount the handler where the program's other debug pages are:
//
//	mux.Handle("/debug/polite/", http.StripPrefix("/debug/polite", t.StatusHandler()))
//
// Its root serves an HTML page, refreshing itself, that works without the
// internet (no external assets); ?format=json serves a [Page]. It costs a
// call nothing while nobody reads it: the history it charts is sampled
// when it is read, into fixed rings.
package politestatus

import (
	"fmt"
	"strings"
	"time"
)

// A Page is the status of a Transport's keys at a moment: the keys that
// wait most, up to the number asked for (?n=, 50 by default), among
// those whose name holds the search (?q=), if any.
type Page struct {
	Time time.Time `json:"time"`
	// Keys is how many keys the Transport holds state for; Matched how
	// many of them hold the search (all, without one).
	Keys    int `json:"keys"`
	Matched int `json:"matched"`
	// Totals are the sends, refusals and local failures of every key,
	// each second the page was read (see [Sample]).
	Totals []Sample `json:"totals"`
	// Top are the keys that wait most, the most first.
	Top []Key `json:"top"`
	// FleetError says why the fleet's store could not say what it holds
	// for the keys shown; "" if it did, or if there is no fleet.
	FleetError string `json:"fleet_error,omitempty"`
}

// A Key is what a Transport knows of one key (see polite.KeyStatus for
// each figure's meaning).
type Key struct {
	Key string `json:"key"`
	// State is where the key's pacing stands: "starting" (its first
	// contact: no limit known yet), "unthrottled", "climbing", "finding",
	// "holding" (its controller's states), or "off" (no controller).
	State string `json:"state"`
	// Rate is what the key is paced at, in requests per second; Limit the
	// server's limit as polite knows it, LimitSource "stated" (a quota the
	// server states) or "measured" (its controller's estimate), "" when it
	// is not known.
	Rate        float64 `json:"rate"`
	Limit       float64 `json:"limit"`
	LimitSource string  `json:"limit_source,omitempty"`
	// Since is when the controller last measured the limit (or began to
	// climb toward it); zero if it has not.
	Since time.Time `json:"since,omitzero"`
	// PausedUntil is when the server's pause (a Retry-After) ends; zero
	// if the key is not paused.
	PausedUntil time.Time `json:"paused_until,omitzero"`
	// Quota is the server's request quota as it last counted it; nil if
	// it counts none down.
	Quota *Quota `json:"quota,omitempty"`
	// Costs are the key's quotas in units other than requests.
	Costs []Cost `json:"costs,omitempty"`
	// Waiting is how many calls wait in the key's lines, by priority,
	// highest first.
	Waiting []Waiting `json:"waiting,omitempty"`
	// Calls is how many calls hold the key: waiting, in flight or between
	// attempts; Members how many processes of a fleet share it (0 without
	// a fleet).
	Calls   int `json:"calls"`
	Members int `json:"members,omitempty"`
	// LastMinute counts what the key did in the samples of the last
	// minute (see History).
	LastMinute Counts `json:"last_minute"`
	// History is one sample each second the page was read, the oldest
	// first, for the keys the page has shown lately.
	History []Sample `json:"history,omitempty"`
	// Fleet is what the fleet's store (Redis) holds for the key, for a
	// Transport that shares a fleet whose store can say; nil otherwise.
	Fleet *Fleet `json:"fleet,omitempty"`
	// Reason says in words why the key waits, or what paces it; "" if
	// nothing does.
	Reason string `json:"reason"`
}

// Fleet is what a fleet's store holds for a key, read when the page was.
type Fleet struct {
	// Known reports that the store holds state for the key.
	Known bool `json:"known"`
	// Members is how many processes sent to the key lately.
	Members int `json:"members"`
	// Limit is the fleet's shared controller's estimate of the server's
	// limit, in requests per second; 0 if none.
	Limit float64 `json:"limit"`
	// Next is when the next send the fleet books may go; zero if none is
	// booked ahead.
	Next time.Time `json:"next,omitzero"`
	// PausedUntil is when the fleet-wide pause ends; zero if none.
	PausedUntil time.Time `json:"paused_until,omitzero"`
}

// A Quota is what a server's request quota holds.
type Quota struct {
	Left  float64   `json:"left"`
	Reset time.Time `json:"reset"`
}

// A Cost is a key's quota in a unit other than requests.
type Cost struct {
	Unit   string  `json:"unit"`
	Limit  float64 `json:"limit"`
	Window float64 `json:"window_seconds"`
	Left   float64 `json:"left"`
}

// Waiting is how many calls of one priority wait.
type Waiting struct {
	Priority string `json:"priority"`
	Calls    int    `json:"calls"`
}

// Counts are the attempts sent to a server, those it refused (throttled)
// and the calls polite failed in the caller's hands before sending them (a
// wait too long for the call's deadline, a cost too large, a context
// done), over Seconds.
type Counts struct {
	Sent    int     `json:"sent"`
	Refused int     `json:"refused"`
	Failed  int     `json:"failed"`
	Seconds float64 `json:"seconds"`
}

// A Sample is what a key (or every key) did since the sample before it:
// taken when the page is read, at most once a second.
type Sample struct {
	Time    time.Time `json:"t"`
	Rate    float64   `json:"rate"`
	Limit   float64   `json:"limit"`
	Sent    int       `json:"sent"`
	Refused int       `json:"refused"`
	Failed  int       `json:"failed"`
	Seconds float64   `json:"seconds"`
}

// Waits reports how many calls wait for the key, at every priority.
func (k *Key) Waits() int {
	n := 0
	for _, w := range k.Waiting {
		n += w.Calls
	}
	return n
}

// Reason returns the line in words that says why k waits, or what paces
// it, at now: its server's pause, its quota spent, its pacing and its
// controller's state, and the queue behind them ("paused by the server's
// Retry-After until 12:03:10; queue of 340 batch calls behind 2
// interactive ones"). Times are given in loc (time.Local if nil). It
// returns "" for a key nothing paces and nothing waits on.
func Reason(k *Key, now time.Time, loc *time.Location) string {
	if loc == nil {
		loc = time.Local
	}
	clock := func(t time.Time) string { return t.In(loc).Format("15:04:05") }
	var parts []string
	switch {
	case k.PausedUntil.After(now):
		parts = append(parts, "paused by the server's Retry-After until "+clock(k.PausedUntil))
	case k.Quota != nil && k.Quota.Left < 1 && k.Quota.Reset.After(now):
		parts = append(parts, "the server's quota is spent until "+clock(k.Quota.Reset))
	case k.State == "starting":
		parts = append(parts, "first contact: sending slowly, then faster, until the server's limit shows")
	case k.State == "holding" && k.Limit > 0:
		under := max(0, 100*(1-k.Rate/k.Limit))
		s := fmt.Sprintf("holding %.0f %% under the limit it measured", under)
		if k.LimitSource == "stated" {
			s = fmt.Sprintf("holding %.0f %% under the limit the server states", under)
		}
		if !k.Since.IsZero() {
			s += " at " + k.Since.In(loc).Format("15:04")
		}
		parts = append(parts, s)
	case k.State == "climbing":
		parts = append(parts, fmt.Sprintf("climbing back at %s after a throttle", perSecond(k.Rate)))
	case k.State == "finding":
		parts = append(parts, fmt.Sprintf("finding the limit: %s and rising", perSecond(k.Rate)))
	case k.Quota != nil && k.Rate > 0 && k.Limit == 0:
		parts = append(parts, fmt.Sprintf("paced at %s to spread the %.0f left of the server's quota until %s", perSecond(k.Rate), k.Quota.Left, clock(k.Quota.Reset)))
	case k.LimitSource == "stated" && k.Rate > 0:
		parts = append(parts, fmt.Sprintf("paced at %s under the server's stated limit of %s", perSecond(k.Rate), perSecond(k.Limit)))
	case k.Rate > 0 && k.Waits() > 0:
		parts = append(parts, "paced at "+perSecond(k.Rate))
	}
	if q := queue(k.Waiting); q != "" {
		parts = append(parts, q)
	}
	return strings.Join(parts, "; ")
}

// queue says in words the calls waiting by priority, highest first:
// "queue of 340 batch calls behind 2 interactive ones".
func queue(ws []Waiting) string {
	var nonzero []Waiting
	for _, w := range ws {
		if w.Calls > 0 {
			nonzero = append(nonzero, w)
		}
	}
	switch len(nonzero) {
	case 0:
		return ""
	case 1:
		if w := nonzero[0]; w.Priority == "default" { // the only one: no class to tell apart
			return fmt.Sprintf("queue of %s", calls(Waiting{Calls: w.Calls}, "calls"))
		}
		return fmt.Sprintf("queue of %s", calls(nonzero[0], "calls"))
	}
	last := nonzero[len(nonzero)-1]
	var ahead []string
	for _, w := range nonzero[:len(nonzero)-1] {
		ahead = append(ahead, calls(w, "ones"))
	}
	return fmt.Sprintf("queue of %s behind %s", calls(last, "calls"), strings.Join(ahead, " and "))
}

// calls says n calls of a priority: "340 batch calls", "1 interactive one".
func calls(w Waiting, noun string) string {
	if w.Calls == 1 {
		noun = strings.TrimSuffix(noun, "s")
	}
	if w.Priority == "" {
		return fmt.Sprintf("%d %s", w.Calls, noun)
	}
	return fmt.Sprintf("%d %s %s", w.Calls, w.Priority, noun)
}

// perSecond writes a rate: "9.5/s".
func perSecond(r float64) string {
	switch {
	case r >= 100:
		return fmt.Sprintf("%.0f/s", r)
	case r >= 10:
		return fmt.Sprintf("%.1f/s", r)
	}
	return fmt.Sprintf("%.2f/s", r)
}
