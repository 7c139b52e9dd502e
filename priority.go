package polite

import (
	"context"
	"fmt"
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

// priorityKey is the context key of a call's priority.
type priorityKey struct{}

// ContextWithPriority returns a copy of ctx that gives the request it goes
// with priority p. It wins over the default of [WithPriority].
func ContextWithPriority(ctx context.Context, p Priority) context.Context {
	return context.WithValue(ctx, priorityKey{}, p)
}

// PriorityFromContext returns the priority ctx gives its request, and
// whether it gives one (see [ContextWithPriority]).
func PriorityFromContext(ctx context.Context) (Priority, bool) {
	p, ok := ctx.Value(priorityKey{}).(Priority)
	return p, ok
}
