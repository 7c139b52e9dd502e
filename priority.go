package polite

import (
	"context"
	"fmt"
	"maps"
	"math"
	"net/http"

	"github.com/politehttp/polite/internal/gate"
)

// A Priority orders the calls that wait on one key: where calls wait (the
// key's pacing and the pauses its server asked for, the server's quotas
// and costs, the places in flight), a call of a higher priority goes
// before every call of a lower one that waits there, and calls of one
// priority go in order of arrival. A call is judged by its place in that
// order: one refused at once because its wait would not end before its
// deadline is refused for the calls ahead of it, not for a backlog of
// lower priority behind it.
//
// The priority orders waits only: it takes no call's place once it is
// sent, and a key whose calls all have one priority waits as it always
// did, first come, first served. The named classes are the ones to use;
// any value between them orders as its number says. Set a call's priority
// with [ContextWithPriority], or a default for each request with
// [WithPriority]; a call with neither has [PriorityDefault].
type Priority int8

// The classes of priority, highest first.
const (
	// PriorityCritical is for the few calls without which the program
	// cannot go on (a token refresh, a health check that gates traffic).
	PriorityCritical Priority = 40
	// PriorityInteractive is for calls a person waits on: a page, a chat
	// reply.
	PriorityInteractive Priority = 20
	// PriorityDefault is the priority of a call that states none.
	PriorityDefault Priority = 0
	// PriorityBatch is for work nobody waits on by the second: a nightly
	// sync, a batch of embeddings.
	PriorityBatch Priority = -20
	// PriorityBackground is for work that may wait for any other: a
	// crawler's refetch, a cache warm-up.
	PriorityBackground Priority = -40
)

// String returns the name of p's class ("interactive"), or its number
// for a value between classes.
func (p Priority) String() string {
	switch p {
	case PriorityCritical:
		return "critical"
	case PriorityInteractive:
		return "interactive"
	case PriorityDefault:
		return "default"
	case PriorityBatch:
		return "batch"
	case PriorityBackground:
		return "background"
	}
	return fmt.Sprintf("Priority(%d)", int8(p))
}

// orderKey is the context key of a call's place in line: its priority and
// its tenant, each if given. Both live in one value, so that a call finds
// them in one walk up its context.
type orderKey struct{}

// order is the value of orderKey.
type order struct {
	priority    Priority
	tenant      string
	hasPriority bool
	hasTenant   bool
}

// orderOf returns the order ctx gives its request.
func orderOf(ctx context.Context) order {
	o, _ := ctx.Value(orderKey{}).(order)
	return o
}

// ContextWithPriority returns a copy of ctx that gives the request it goes
// with priority p. It wins over the default of [WithPriority].
func ContextWithPriority(ctx context.Context, p Priority) context.Context {
	o := orderOf(ctx)
	o.priority, o.hasPriority = p, true
	return context.WithValue(ctx, orderKey{}, o)
}

// PriorityFromContext returns the priority ctx gives its request, and
// whether it gives one (see [ContextWithPriority]).
func PriorityFromContext(ctx context.Context) (Priority, bool) {
	o := orderOf(ctx)
	return o.priority, o.hasPriority
}

// ContextWithTenant returns a copy of ctx that makes the request it goes
// with work of tenant: a customer of a crawler or of a service, one of
// the programs that share an API key. Among the calls of one priority
// that wait on a key, each tenant with calls waiting gets its weight's
// share of the turns (see [WithTenantWeight]; 1 each by default), one
// with none waiting takes nothing and leaves its share to the others,
// and a tenant's burst waits behind its own share, not the others'.
// Calls of no tenant share as one tenant of weight 1; with no tenants at
// all, calls of one priority go in order of arrival.
//
// The tenant orders waits only. polite never logs it (it may be a
// customer's name); hooks see it in [Event.Tenant].
func ContextWithTenant(ctx context.Context, tenant string) context.Context {
	o := orderOf(ctx)
	o.tenant, o.hasTenant = tenant, true
	return context.WithValue(ctx, orderKey{}, o)
}

// TenantFromContext returns the tenant ctx makes its request work of, and
// whether it gives one (see [ContextWithTenant]).
func TenantFromContext(ctx context.Context) (string, bool) {
	o := orderOf(ctx)
	return o.tenant, o.hasTenant
}

// WithPriority sets the priority of each request whose context gives none
// (see [ContextWithPriority]) to what of returns for it: an SDK sets its
// calls' priorities by their kind (a listing in the background, a user's
// action interactive) without touching its callers' contexts. of must be
// safe for concurrent use and must not keep the request. A nil of is
// [PriorityDefault] for every request, as without the option.
func WithPriority(of func(*http.Request) Priority) Option {
	return func(c *config) {
		c.priority = nil
		if of != nil {
			c.priority = func(r *http.Request) gate.Priority { return gate.Priority(of(r)) }
		}
	}
}

// WithTenantWeight sets each tenant's share (see [ContextWithTenant]) to
// what weight returns for it: among the calls of one priority waiting on a
// key, tenants with calls waiting get turns in the ratio of their weights.
// A weight that is no positive number counts as 1, as every tenant's does
// without the option. weight must be safe for concurrent use; it is asked
// once per call of a tenant.
func WithTenantWeight(weight func(tenant string) float64) Option {
	return func(c *config) { c.tenantWeight = weight }
}

// DefaultPriorityFloor is the share of a key's turns the calls of each
// priority keep while calls of higher priorities wait, unless
// [WithPriorityFloor] or [WithPriorityWeight] says otherwise.
const DefaultPriorityFloor = gate.DefaultFloor

// WithPriorityFloor sets the floor of priority p: the share of a key's
// turns its calls keep while calls of higher priorities wait, for as long
// as they have calls waiting ([DefaultPriorityFloor], a tenth, without
// the option). A higher floor keeps a batch going faster under an
// interactive load; 0 makes the order strict: the calls of p wait for
// every call of a higher priority, and may starve under its load. A share
// above 0.95 counts as 0.95, and one that is no number as the default. A
// priority's share is a floor, not a cap: with nothing of a higher
// priority waiting, its calls take every turn.
func WithPriorityFloor(p Priority, share float64) Option {
	return func(c *config) {
		class := c.classes[gate.Priority(p)]
		switch {
		case math.IsNaN(share):
			class.Floor, class.Strict = 0, false
		case share <= 0:
			class.Floor, class.Strict = 0, true
		default:
			class.Floor, class.Strict = min(share, 0.95), false
		}
		c.setClass(p, class)
	}
}

// WithPriorityWeight makes the calls of priority p share a key's turns
// by weight rather than wait for those of higher priorities: the
// priorities given a weight that have calls waiting take turns in the
// ratio of their weights (interactive 3 and batch 1: three turns in four,
// and one), and a priority with nothing waiting leaves its turns to the
// others. A priority given no weight keeps its floor ([WithPriorityFloor]).
// A weight that is no positive number removes p's.
func WithPriorityWeight(p Priority, weight float64) Option {
	return func(c *config) {
		class := c.classes[gate.Priority(p)]
		class.Weight = 0
		if weight > 0 && !math.IsInf(weight, 1) {
			class.Weight = weight
		}
		c.setClass(p, class)
	}
}

// setClass sets how priority p shares turns under c, in a map of its own:
// an Option applied to several configs changes none of the others.
func (c *config) setClass(p Priority, class gate.Class) {
	classes := maps.Clone(c.classes)
	if classes == nil {
		classes = make(map[gate.Priority]gate.Class, 1)
	}
	classes[gate.Priority(p)] = class
	c.classes = classes
}

// placeOf returns where req waits in line under c: its priority and how
// it shares turns with the others, its tenant and the tenant's weight.
func (c *config) placeOf(req *http.Request) gate.Place {
	o := orderOf(req.Context())
	pl := gate.Place{Priority: gate.Priority(o.priority), Weight: 1}
	if !o.hasPriority && c.priority != nil {
		pl.Priority = c.priority(req)
	}
	if c.classes != nil {
		pl.Class = c.classes[pl.Priority]
	}
	if o.hasTenant {
		pl.Tenant = o.tenant
		if c.tenantWeight != nil {
			pl.Weight = c.tenantWeight(o.tenant)
		}
	}
	return pl
}
