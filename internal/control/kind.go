package control

import "time"

// A Kind is which controller every key of a Transport has.
type Kind int8

// The kinds, in the order of polite's AdaptiveMode.
const (
	KindGentle Kind = iota
	KindCubic
	KindAIMD
	KindOff
)

// A Cell holds one key's Gentle, inline, so that a key's state is one
// allocation (a crawler holds one per host). Cubic and AIMD live behind a
// pointer the key keeps with the parts few keys need.
type Cell struct {
	gentle Gentle
}

// Init makes a key's controller of kind k, created at now: Gentle in c,
// the others in *other.
func (k Kind) Init(c *Cell, other *Controller, now time.Time) {
	switch k {
	case KindGentle:
		c.gentle.Init(now)
	case KindCubic:
		*other = NewCubic(now)
	case KindAIMD:
		*other = NewAIMD(now)
	}
}

// Of returns a key's controller under kind k, kept in c or other as Init
// made it; nil under KindOff.
func (k Kind) Of(c *Cell, other Controller) Controller {
	switch k {
	case KindGentle:
		return &c.gentle
	case KindOff:
		return nil
	}
	return other
}

// Gentle returns the Gentle of c, for a test that looks inside it.
func (c *Cell) Gentle() *Gentle { return &c.gentle }
