package main

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/didip/tollbooth/v8"
	tblimiter "github.com/didip/tollbooth/v8/limiter"
	"github.com/go-chi/httprate"
	"github.com/sethvargo/go-limiter/httplimit"
	"github.com/sethvargo/go-limiter/memorystore"
	"github.com/throttled/throttled/v2"
	"github.com/throttled/throttled/v2/store/memstore"
	ulule "github.com/ulule/limiter/v3"
	ulstdlib "github.com/ulule/limiter/v3/drivers/middleware/stdlib"
	ulmemory "github.com/ulule/limiter/v3/drivers/store/memory"
	"golang.org/x/time/rate"
)

// burst is the burst, in requests, of every token-bucket or GCRA server.
const burst = 10

// perSecond returns the limit as the whole number of requests per second
// the libraries take.
func perSecond(cfg serverConfig) int { return perWindow(cfg, time.Second) }

// perWindow returns the limit as the whole number of requests a window
// allows, one at least.
func perWindow(cfg serverConfig, window time.Duration) int {
	return max(1, int(math.Round(cfg.limit*window.Seconds())))
}

// startHTTPRate starts go-chi/httprate: a sliding-window counter of L
// requests per 1 s window, one bucket for every client.
func startHTTPRate(cfg serverConfig) (*instance, error) {
	origin := time.Now()
	mw := httprate.LimitBy(perSecond(cfg), time.Second, httprate.Key("*"))
	return serveInProcess(mw, origin)
}

// startTollbooth starts didip/tollbooth: a token bucket (its vendored
// x/time/rate) of L per second and burst 10 per remote IP and path.
func startTollbooth(cfg serverConfig) (*instance, error) {
	origin := time.Now()
	lmt := tollbooth.NewLimiter(float64(perSecond(cfg)), nil).SetBurst(burst)
	lmt.SetIPLookup(tblimiter.IPLookup{Name: "RemoteAddr"})
	return serveInProcess(tollbooth.HTTPMiddleware(lmt), origin)
}

// startUlule starts ulule/limiter with its memory store and rate "L-S": a
// fixed window of L requests per second per remote IP, each window opened
// by the first request after the previous one expired.
func startUlule(cfg serverConfig) (*instance, error) {
	origin := time.Now()
	rate, err := ulule.NewRateFromFormatted(fmt.Sprintf("%d-S", perSecond(cfg)))
	if err != nil {
		return nil, err
	}
	mw := ulstdlib.NewMiddleware(ulule.New(ulmemory.NewStore(), rate))
	return serveInProcess(mw.Handler, origin)
}

// startSethvargo starts sethvargo/go-limiter's memorystore, L tokens per 1 s
// interval per remote IP, behind its httplimit middleware.
func startSethvargo(cfg serverConfig) (*instance, error) {
	origin := time.Now()
	store, err := memorystore.New(&memorystore.Config{
		Tokens:   uint64(perSecond(cfg)),
		Interval: time.Second,
	})
	if err != nil {
		return nil, err
	}
	mw, err := httplimit.NewMiddleware(store, httplimit.IPKeyFunc())
	if err != nil {
		return nil, err
	}
	closeStore := func() { _ = store.Close(context.Background()) }
	return serveInProcess(mw.Handle, origin, closeStore)
}

// startThrottled starts throttled/throttled's GCRA with its memstore: L per
// second per remote IP with MaxBurst 9, which admits 10 requests at once.
func startThrottled(cfg serverConfig) (*instance, error) {
	origin := time.Now()
	store, err := memstore.NewCtx(65536)
	if err != nil {
		return nil, err
	}
	quota := throttled.RateQuota{MaxRate: throttled.PerSec(perSecond(cfg)), MaxBurst: burst - 1}
	gcra, err := throttled.NewGCRARateLimiterCtx(store, quota)
	if err != nil {
		return nil, err
	}
	lim := &throttled.HTTPRateLimiterCtx{
		RateLimiter: gcra,
		VaryBy:      &throttled.VaryBy{RemoteAddr: true},
	}
	return serveInProcess(func(next http.Handler) http.Handler { return lim.RateLimit(next) }, origin)
}

// startBurst1 starts the limiter most Go services write for themselves:
// one golang.org/x/time/rate limiter of L per second with a burst of 1,
// behind a middleware that answers a bare 429 when Allow says no (no
// headers, no Retry-After). A refusal takes no token; two requests closer
// than 1/L apart are one too many.
func startBurst1(cfg serverConfig) (*instance, error) {
	origin := time.Now()
	lim := rate.NewLimiter(rate.Limit(perSecond(cfg)), 1)
	mw := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !lim.Allow() {
				w.WriteHeader(http.StatusTooManyRequests)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	return serveInProcess(mw, origin)
}
