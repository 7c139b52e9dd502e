-- budget.lua gives a retry budget the refunds told and takes a retry's
-- cost from it if it holds that much (budgetScript, in budget.go). KEYS[1]
-- is the budget's hash (t: the tokens it holds). ARGV: the capacity, the
-- refunds, the cost (0: take nothing), how long the state outlives this
-- call in ms. It replies {1 if the cost was taken, the tokens held after}.

local capacity, refund, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local tokens = tonumber(redis.call('HGET', KEYS[1], 't')) or capacity
tokens = tokens + refund
if tokens > capacity then tokens = capacity end
local taken = 0
if cost <= tokens then
  tokens = tokens - cost
  taken = 1
end
redis.call('HSET', KEYS[1], 't', tokens)
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return {taken, tokens}
