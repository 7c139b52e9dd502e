package fleet

// RedisKey returns the Redis key of polite key key with suffix s, m or w,
// under namespace ns.
func RedisKey(ns, key, suffix string) string {
	f := &Fleet{ns: ns}
	switch suffix {
	case "s":
		return f.keys(key)[0]
	case "w":
		return f.keys(key)[1]
	}
	return f.keys(key)[2]
}
