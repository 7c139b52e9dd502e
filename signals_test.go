package polite

import (
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/politehttp/polite/internal/signals"
)

// Signals mirrors the engine's signals.Signals field for field, and
// signalsOf and internal copy every field: a field added to one and not
// the other, or not copied, fails here.
func TestSignalsMirrorTheEngines(t *testing.T) {
	names := func(v any) []string {
		var out []string
		typ := reflect.TypeOf(v)
		for i := range typ.NumField() {
			out = append(out, typ.Field(i).Name)
		}
		return out
	}
	assert.Equal(t, names(signals.Signals{}), names(Signals{}))
	q := Quota{Limit: 1, Remaining: 2, Reset: time.Unix(3, 0), Slack: 4, Window: 5, Policy: "p", Unit: UnitTokens, Refill: true}
	s := Signals{RetryAfter: 1, HasRetryAfter: true, RetryAfterSlack: 2, Quota: q, HasQuota: true,
		Quotas: []Quota{q}, Bucket: "b", Global: true, Cached: true}
	for i := range reflect.TypeOf(s).NumField() {
		assert.False(t, reflect.ValueOf(s).Field(i).IsZero(), "the test sets every field: %s", reflect.TypeOf(s).Field(i).Name)
	}
	assert.Equal(t, s, signalsOf(s.internal()))
}
