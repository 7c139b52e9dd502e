// Package politecost paces requests to APIs that count their quotas in
// tokens or points rather than requests: OpenAI, Azure OpenAI, Anthropic,
// GitHub's GraphQL API and Shopify's GraphQL Admin API. It is a module of
// its own, so that polite's core carries no JSON or server-sent events
// reading of vendors' bodies, and it uses no vendor SDK.
//
//	t := polite.New(nil, politecost.OpenAI())
//	client := openai.NewClient(option.WithHTTPClient(&http.Client{Transport: t}))
//
// Each dialect returns one [polite.Option], a bundle of:
//
//   - an estimator ([polite.WithCost]): what the request will cost, as the
//     server reserves it on admission, read from the request's body, and
//     the scope of its quota (the model, the deployment), added to the
//     request's key;
//   - a usage reader ([polite.WithUsage]): what the request actually cost,
//     read from the end of the answer's body (a JSON answer's usage
//     object, a stream's last events), which gives back what the estimate
//     took too much, as the server does;
//   - for the GraphQL APIs, a reader of throttles that a 200 carries in its
//     body ([polite.WithThrottleBody]).
//
// The rate-limit headers of these APIs (x-ratelimit-*,
// anthropic-ratelimit-*) are polite's own business: it reads them on every
// answer, with or without this package, and keeps a bucket for each unit
// of each key. A cost the caller states ([polite.ContextWithCost]) wins
// over the estimate. Give a Transport one dialect: a second one's
// estimator and usage reader replace the first's.
//
// The calls of these APIs are POSTs. polite retries a throttled one (a
// 429, or a GraphQL throttle in a 200) whatever its method, since the
// server refused it unprocessed, after the wait the server asked for; it
// retries one that failed otherwise (a 5xx, a broken connection) only if
// it carries an Idempotency-Key header, or under
// [polite.WithRetryNonIdempotent], since an LLM may have generated, and
// billed, its answer.
//
// # What each dialect estimates and settles
//
//	dialect        unit                     estimate (before)                        settlement (after)                 scope
//	OpenAI         tokens                   ceil(chars/4) of the input               usage: prompt + completion         model
//	                                        + n × max tokens (else 4,096)            tokens (JSON, stream)
//	AzureOpenAI    tokens                   as OpenAI's (best_of counted)            none: Azure settles nothing        deployment
//	Anthropic      input-, output-tokens    ceil(chars/4) of system + messages;      usage: input + cache creation;     model
//	                                        max_tokens                               output (JSON, stream)
//	GitHubGraphQL  points                   GitHub's rule: requests of every         rateLimit { cost }                 "graphql"
//	                                        connection by first/last, ÷100, ≥ 1
//	ShopifyGraphQL points                   requestedQueryCost learnt for the        actualQueryCost; throttleStatus    —
//	                                        query, else 10                           sets the bucket
//
// Why these rules: each estimate is the server's own admission rule, as
// far as a client can compute it, because a client that reserves less than
// the server does is refused, and one that reserves more idles. OpenAI
// admits on "the character count of your request" and max_tokens;
// Anthropic estimates input tokens at the start and reserves max_tokens of
// output; Azure charges "prompt text and count, max_tokens, best_of";
// GitHub documents its formula; Shopify computes a query's requested cost
// from its schema, which a client does not have, and states it in every
// answer. Each settlement is the server's own bill, so that what the
// estimate took too much is free again at once: a client that never gives
// back unused max_tokens uses about three quarters of an OpenAI token
// quota.
//
// # Bodies
//
// An estimator reads at most [polite.MaxEstimateBody] of a request's body,
// through its GetBody (set by http.NewRequest for in-memory bodies, and by
// the SDKs); a request without GetBody is estimated by its Content-Length.
// Estimators decode only the fields they need into structs, without
// keeping the text they count. A usage reader sees at most
// [polite.MaxUsageTail] of the body's end, never a whole JSON document: it
// finds the last usage object (the last "usage" key whose quote is not
// escaped, followed by a whole object) and decodes only that. Every reader
// is fuzzed; none fails a request: a body it cannot read costs what it
// documents, or leaves the estimate standing.
package politecost
