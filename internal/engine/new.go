package engine

import (
	"math"
	"time"

	"github.com/politehttp/polite/internal/control"
	"github.com/politehttp/polite/internal/registry"
	"github.com/politehttp/polite/internal/robots"
)

// New returns an engine made with cfg.
func New(cfg Config) *Engine {
	e := &Engine{
		cfg:       cfg,
		stateless: cfg.PerSecond == 0 && cfg.Kind == control.KindOff && cfg.MaxInFlight == 0 && cfg.Memory == nil,
		epoch:     time.Now(),
	}
	e.keys.Init(cfg.Idle, e.newKey, (*Key).busy)
	e.buckets.idle = cfg.Idle
	if cfg.GlobalRate > 0 {
		e.global = new(Key)
		e.global.pace.Init(cfg.GlobalRate, min(cfg.GlobalBurst, math.MaxInt32))
	}
	if cfg.CrawlDelay {
		e.sites = new(registry.Table[robots.Site])
		e.sites.Init(cfg.Idle, func(string, time.Time) *robots.Site { return new(robots.Site) }, (*robots.Site).Busy)
	}
	return e
}

// newKey makes the state of key at now: a new key's, or one remembered by
// the engine's Memory.
func (e *Engine) newKey(key string, now time.Time) *Key {
	k := new(Key)
	var other control.Controller
	e.cfg.Kind.Init(&k.ctl, &other, now)
	if other != nil {
		k.parts.Store(&parts{other: other})
	}
	if e.cfg.PerSecond > 0 {
		k.pace.Init(e.cfg.PerSecond, min(e.cfg.Burst, math.MaxInt32))
	}
	if m := e.cfg.Memory; m != nil {
		if r, ok := m.Recall(key); ok {
			e.recall(k, r, now)
		}
	}
	return k
}
