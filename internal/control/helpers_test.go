package control

import "time"

// outcomeOf returns the outcome of an attempt that was throttled or not.
func outcomeOf(throttled bool) Outcome {
	if throttled {
		return Throttled
	}
	return OK
}

// Update feeds g an attempt sent at an unknown moment, as polite's Gentle
// does.
func (g *Gentle) Update(now time.Time, throttled bool) { g.UpdateStated(now, throttled, 0) }

// UpdateStated is Update with the limit the server states.
func (g *Gentle) UpdateStated(now time.Time, throttled bool, stated float64) {
	g.Observe(now, outcomeOf(throttled), stated, NoMark, 0)
}

// Update feeds c the outcome of one attempt, as polite's Cubic does.
func (c *Cubic) Update(now time.Time, throttled bool) { c.update(now, throttled) }

// Update feeds a the outcome of one attempt, as polite's AIMD does.
func (a *AIMD) Update(now time.Time, throttled bool) { a.update(now, throttled) }
