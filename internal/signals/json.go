package signals

import (
	"encoding/json"
	"fmt"
	"time"
)

// signalsJSON is the JSON form of [Signals]: field names in snake_case,
// durations in seconds.
type signalsJSON struct {
	RetryAfter      float64     `json:"retry_after"`
	HasRetryAfter   bool        `json:"has_retry_after"`
	RetryAfterSlack float64     `json:"retry_after_slack"`
	Quota           quotaJSON   `json:"quota"`
	HasQuota        bool        `json:"has_quota"`
	Bucket          string      `json:"bucket"`
	Global          bool        `json:"global"`
	Cached          bool        `json:"cached"`
	Quotas          []quotaJSON `json:"quotas,omitempty"`
}

// quotaJSON is the JSON form of [Quota]; a zero Reset is left out.
type quotaJSON struct {
	Limit     float64   `json:"limit"`
	Remaining float64   `json:"remaining"`
	Reset     time.Time `json:"reset,omitzero"`
	Slack     float64   `json:"slack"`
	Window    float64   `json:"window"`
	Policy    string    `json:"policy"`
	Unit      string    `json:"unit"`
	Refill    bool      `json:"refill,omitempty"`
}

// MarshalJSON encodes s as a JSON object whose field names are the
// fields' in snake_case (retry_after, has_retry_after, retry_after_slack,
// quota, has_quota, bucket, global, cached, and quotas when there are
// any), with durations in seconds (fractional) and times in RFC 3339.
func (s Signals) MarshalJSON() ([]byte, error) {
	var quotas []quotaJSON
	for _, q := range s.Quotas {
		quotas = append(quotas, q.wire())
	}
	return json.Marshal(signalsJSON{
		RetryAfter:      s.RetryAfter.Seconds(),
		HasRetryAfter:   s.HasRetryAfter,
		RetryAfterSlack: s.RetryAfterSlack.Seconds(),
		Quota:           s.Quota.wire(),
		HasQuota:        s.HasQuota,
		Bucket:          s.Bucket,
		Global:          s.Global,
		Cached:          s.Cached,
		Quotas:          quotas,
	})
}

// UnmarshalJSON decodes what [Signals.MarshalJSON] encodes. A duration
// that is negative or too long for a time.Duration is an error.
func (s *Signals) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil // as encoding/json leaves a value it reads null into
	}
	var w signalsJSON
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	q, err := w.Quota.quota()
	if err != nil {
		return err
	}
	retryAfter, err := jsonSeconds("retry_after", w.RetryAfter)
	if err != nil {
		return err
	}
	slack, err := jsonSeconds("retry_after_slack", w.RetryAfterSlack)
	if err != nil {
		return err
	}
	var quotas []Quota
	for _, wq := range w.Quotas {
		q, err := wq.quota()
		if err != nil {
			return err
		}
		quotas = append(quotas, q)
	}
	*s = Signals{
		RetryAfter:      retryAfter,
		HasRetryAfter:   w.HasRetryAfter,
		RetryAfterSlack: slack,
		Quota:           q,
		HasQuota:        w.HasQuota,
		Bucket:          w.Bucket,
		Global:          w.Global,
		Cached:          w.Cached,
		Quotas:          quotas,
	}
	return nil
}

// MarshalJSON encodes q as a JSON object with the field names limit,
// remaining, reset (RFC 3339, left out when zero), slack and window (in
// seconds), policy, unit, and refill when it is true.
func (q Quota) MarshalJSON() ([]byte, error) { return json.Marshal(q.wire()) }

// UnmarshalJSON decodes what [Quota.MarshalJSON] encodes.
func (q *Quota) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil
	}
	var w quotaJSON
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	v, err := w.quota()
	if err != nil {
		return err
	}
	*q = v
	return nil
}

func (q Quota) wire() quotaJSON {
	return quotaJSON{
		Limit:     q.Limit,
		Remaining: q.Remaining,
		Reset:     q.Reset,
		Slack:     q.Slack.Seconds(),
		Window:    q.Window.Seconds(),
		Policy:    q.Policy,
		Unit:      q.Unit,
		Refill:    q.Refill,
	}
}

func (w quotaJSON) quota() (Quota, error) {
	slack, err := jsonSeconds("quota.slack", w.Slack)
	if err != nil {
		return Quota{}, err
	}
	window, err := jsonSeconds("quota.window", w.Window)
	if err != nil {
		return Quota{}, err
	}
	return Quota{
		Limit:     w.Limit,
		Remaining: w.Remaining,
		Reset:     w.Reset,
		Slack:     slack,
		Window:    window,
		Policy:    w.Policy,
		Unit:      w.Unit,
		Refill:    w.Refill,
	}, nil
}

// jsonSeconds converts the seconds of a JSON field to a Duration.
func jsonSeconds(field string, f float64) (time.Duration, error) {
	d, ok := Seconds(f)
	if !ok {
		return 0, fmt.Errorf("polite: %s: %v seconds is not a duration polite can hold", field, f)
	}
	return d, nil
}
