package engine

import (
	"sync"
	"time"

	"github.com/politehttp/polite/internal/quota"
	"github.com/politehttp/polite/internal/registry"
)

// buckets are the quotas of the buckets servers name (Discord's bucket,
// the IETF partition key, GitHub's resource), shared by every key whose
// requests count against them, by host and name. Idle ones are forgotten
// as idle keys are; one whose quota is spent until a reset, or paused, is
// pinned until then. The table is made when a server first names a
// bucket.
type buckets struct {
	idle time.Duration
	once sync.Once
	t    registry.Table[quota.Quota]
}

// bucketKey is the table's key of the bucket name of the server at host.
func bucketKey(host, name string) string { return host + "\x00" + name }

// table returns the table, made if needed.
func (b *buckets) table() *registry.Table[quota.Quota] {
	b.once.Do(func() {
		b.t.Init(b.idle, func(string, time.Time) *quota.Quota { return new(quota.Quota) }, nil)
	})
	return &b.t
}

// get returns the quota of the bucket name of the server at host, made if
// needed, at now.
func (b *buckets) get(host, name string, now time.Time) *quota.Quota {
	return b.table().Use(bucketKey(host, name), now)
}

// pin keeps the bucket name of the server at host until until.
func (b *buckets) pin(host, name string, until time.Time) {
	b.table().Pin(bucketKey(host, name), until)
}
