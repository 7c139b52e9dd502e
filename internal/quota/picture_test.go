package quota

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/politehttp/polite/internal/signals"
	"github.com/politehttp/polite/internal/units"
)

// The quota in requests and a quota in tokens, given the same readings,
// hold the same picture of the server's quota: its limit, its window
// (stated, learnt from a bucket's reading, or from resets that stay put)
// and whether it refills. Only their pacing differs.
func TestOnePictureWhateverTheUnit(t *testing.T) {
	type reading struct {
		after time.Duration // from epoch
		q     signals.Quota
	}
	for _, c := range []struct {
		name     string
		readings []reading
		window   time.Duration
		refills  bool
	}{
		{"a bucket's reading: a minute, snapped", []reading{
			{0, signals.Quota{Limit: 600, Remaining: 300, Reset: at(29 * time.Second), Refill: true}},
		}, time.Minute, true},
		{"a bucket read again within 15% keeps its 30 s", []reading{
			{0, signals.Quota{Limit: 600, Remaining: 300, Reset: at(15 * time.Second), Refill: true}},
			{time.Second, signals.Quota{Limit: 600, Remaining: 300, Reset: at(time.Second + 16500*time.Millisecond), Refill: true}},
		}, 30 * time.Second, true},
		{"a bucket far off its minute is read anew", []reading{
			{0, signals.Quota{Limit: 600, Remaining: 300, Reset: at(29 * time.Second), Refill: true}},
			{time.Second, signals.Quota{Limit: 600, Remaining: 300, Reset: at(time.Second + 5*time.Second), Refill: true}},
		}, 10 * time.Second, true},
		{"a stated window", []reading{
			{0, signals.Quota{Limit: 100, Remaining: 50, Window: 10 * time.Second, Reset: at(5 * time.Second), Slack: time.Second}},
		}, 10 * time.Second, false},
		{"resets that stay put, then step on by 5 s", []reading{
			{0, signals.Quota{Limit: 100, Remaining: 90, Reset: at(3 * time.Second), Slack: time.Second}},
			{time.Second, signals.Quota{Limit: 100, Remaining: 80, Reset: at(3 * time.Second), Slack: time.Second}},
			{4 * time.Second, signals.Quota{Limit: 100, Remaining: 90, Reset: at(8 * time.Second), Slack: time.Second}},
			{5 * time.Second, signals.Quota{Limit: 100, Remaining: 80, Reset: at(8 * time.Second), Slack: time.Second}},
		}, 5 * time.Second, false},
		{"resets that move with every response teach nothing", []reading{
			{0, signals.Quota{Limit: 100, Remaining: 90, Reset: at(time.Second), Slack: time.Second}},
			{time.Second, signals.Quota{Limit: 100, Remaining: 90, Reset: at(2 * time.Second), Slack: time.Second}},
			{2 * time.Second, signals.Quota{Limit: 100, Remaining: 90, Reset: at(3 * time.Second), Slack: time.Second}},
		}, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var q Quota
			cs := NewCosts(&[units.N]Configured{}, epoch)
			for _, r := range c.readings {
				now := at(r.after)
				q.Sync(now, r.q, 0, false)
				tokens := r.q
				tokens.Unit = units.NameTokens
				cs.Answer(now, cs.Sent(now), []signals.Quota{tokens}, nil, "")
			}
			b := cs.units[units.Tokens].picture
			assert.Equal(t, c.window, q.window, "the request quota's window")
			assert.Equal(t, c.refills, q.refills)
			assert.Equal(t, q.picture, b, "the two pictures")
		})
	}
}
