package politestatus_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/politehttp/polite/politestatus"
)

func TestReason(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		key  politestatus.Key
		want string
	}{
		{"nothing paces it", politestatus.Key{State: "unthrottled"}, ""},
		{"paused", politestatus.Key{State: "holding", Rate: 9, Limit: 10, PausedUntil: now.Add(70 * time.Second)},
			"paused by the server's Retry-After until 12:01:10"},
		{"a pause over says nothing", politestatus.Key{State: "unthrottled", PausedUntil: now.Add(-time.Second)}, ""},
		{"quota spent", politestatus.Key{State: "unthrottled", Quota: &politestatus.Quota{Left: 0, Reset: now.Add(5 * time.Second)}},
			"the server's quota is spent until 12:00:05"},
		{"quota spread", politestatus.Key{State: "unthrottled", Rate: 2.5, Quota: &politestatus.Quota{Left: 30, Reset: now.Add(12 * time.Second)}},
			"paced at 2.50/s to spread the 30 left of the server's quota until 12:00:12"},
		{"stated", politestatus.Key{State: "unthrottled", Rate: 9.5, Limit: 10, LimitSource: "stated"},
			"paced at 9.50/s under the server's stated limit of 10.0/s"},
		{"first contact", politestatus.Key{State: "starting", Rate: 4}, "first contact: sending slowly, then faster, until the server's limit shows"},
		{"holding", politestatus.Key{State: "holding", Rate: 98, Limit: 100, LimitSource: "measured", Since: now.Add(-2 * time.Minute)},
			"holding 2 % under the limit it measured at 11:58"},
		{"holding a stated limit", politestatus.Key{State: "holding", Rate: 95, Limit: 100, LimitSource: "stated"},
			"holding 5 % under the limit the server states"},
		{"climbing", politestatus.Key{State: "climbing", Rate: 12}, "climbing back at 12.0/s after a throttle"},
		{"finding", politestatus.Key{State: "finding", Rate: 150}, "finding the limit: 150/s and rising"},
		{"paced and waiting", politestatus.Key{State: "off", Rate: 5, Waiting: []politestatus.Waiting{{Priority: "default", Calls: 1}}},
			"paced at 5.00/s; queue of 1 call"},
		{"one class waiting", politestatus.Key{State: "off", Waiting: []politestatus.Waiting{{Priority: "batch", Calls: 4}}},
			"queue of 4 batch calls"},
		{"a queue by priority", politestatus.Key{State: "holding", Rate: 98, Limit: 100, LimitSource: "measured",
			Waiting: []politestatus.Waiting{{Priority: "interactive", Calls: 2}, {Priority: "batch", Calls: 340}}},
			"holding 2 % under the limit it measured; queue of 340 batch calls behind 2 interactive ones"},
		{"three priorities", politestatus.Key{State: "off",
			Waiting: []politestatus.Waiting{{Priority: "critical", Calls: 1}, {Priority: "default", Calls: 3}, {Priority: "batch", Calls: 7}}},
			"queue of 7 batch calls behind 1 critical one and 3 default ones"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, politestatus.Reason(&tt.key, now, time.UTC))
		})
	}
}
