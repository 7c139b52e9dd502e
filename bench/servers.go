package main

import (
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"time"
)

// A server is one kind of rate-limited server the bench can start: a
// third-party limiter or a synthetic one.
type server struct {
	name string
	// profile returns the limit the server enforces over a run, given the
	// bench's limit L.
	profile func(limit float64) profile
	// start starts a fresh instance, cold: its limiter has seen no request.
	start func(cfg serverConfig) (*instance, error)
}

// serverConfig is what a server is told when it starts.
type serverConfig struct {
	limit    float64       // L, requests per second
	duration time.Duration // length of the run
	profile  profile       // the server's own profile for this limit
}

// An instance is a running server.
type instance struct {
	url string
	// origin is when the instance began serving: the run, and the server's
	// windows and schedule, count from here.
	origin time.Time
	// stop stops the server and returns every attempt it saw.
	stop func() ([]arrival, error)
}

// An arrival is one attempt as the server saw it.
type arrival struct {
	at     time.Time // when the request arrived (or, for nginx and HAProxy, was logged)
	status int       // the status the server answered with
}

// errMissing marks a server that cannot run here because a program it
// needs is not installed; its rows are skipped, not failed.
var errMissing = errors.New("not installed")

// servers returns every server, in the order the table lists them.
func servers() []server {
	return []server{
		{name: "httprate", profile: constant, start: startHTTPRate},
		{name: "tollbooth", profile: constant, start: startTollbooth},
		{name: "ulule", profile: constant, start: startUlule},
		{name: "sethvargo", profile: constant, start: startSethvargo},
		{name: "throttled", profile: constant, start: startThrottled},
		{name: "burst1", profile: constant, start: startBurst1},
		{name: "nginx", profile: constant, start: startNginx},
		{name: "nginx-queue", profile: constant, start: startNginxQueue},
		{name: "haproxy", profile: constant, start: startHAProxy},
		{name: "gcra-drop", profile: dropProfile(2, 0.5), start: startBucket},
		{name: "drop4x", profile: dropProfile(1, 0.25), start: startBucket},
		{name: "outage", profile: outageProfile, start: startBucket},
		{name: "github", profile: constant, start: startGitHub},
		{name: "window-aligned", profile: constant, start: startWindowAligned},
		{name: "window-seconds", profile: constant, start: startWindowSeconds},
		{name: "delay", profile: constant, start: startDelay},
	}
}

// dropProfile returns the profile of a limit of hi×L in the first and last
// thirds and lo×L in the middle one.
func dropProfile(hi, lo float64) func(float64) profile {
	return func(limit float64) profile {
		return profile{rates: [3]float64{hi * limit, lo * limit, hi * limit}}
	}
}

// outageProfile is a limit of L with a full outage in the middle third.
func outageProfile(limit float64) profile {
	p := constant(limit)
	p.outage = true
	return p
}

// serveInProcess serves limited(ok) on a fresh loopback listener, behind a
// recorder that counts every attempt. origin is when the limiter was made;
// closers run when the instance stops.
func serveInProcess(limited func(http.Handler) http.Handler, origin time.Time, closers ...func()) (*instance, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	rec := &recorder{}
	srv := &http.Server{
		Handler:           rec.wrap(limited(okHandler())),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln) // always ErrServerClosed or a listener error, once Close is called
	}()
	stop := func() ([]arrival, error) {
		err := srv.Close()
		<-done
		for _, c := range closers {
			c()
		}
		return rec.arrivals(), err
	}
	return &instance{url: "http://" + ln.Addr().String() + "/", origin: origin, stop: stop}, nil
}

// okHandler is the handler behind every in-process limiter: 200 and a tiny
// body.
func okHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
}

// A recorder records the arrival time and final status of every request
// through the handlers it wraps. It is safe for concurrent use.
type recorder struct {
	mu   sync.Mutex
	seen []arrival
}

// wrap returns next with every request recorded.
func (rec *recorder) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		status := sw.status
		if status == 0 {
			status = http.StatusOK
		}
		rec.mu.Lock()
		rec.seen = append(rec.seen, arrival{at: at, status: status})
		rec.mu.Unlock()
	})
}

// arrivals returns what the recorder has seen so far.
func (rec *recorder) arrivals() []arrival {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]arrival(nil), rec.seen...)
}

// statusWriter remembers the first status written through it.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
