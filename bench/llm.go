package main

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/politehttp/polite/internal/llmfake"
)

// llmOptions is what the command line asks of the LLM bench.
type llmOptions struct {
	dialects, clients string
	cfg               llmConfig
	check, timeline   bool
	jsonPath          string
}

// llmMain runs the LLM bench: every dialect × client, one after another,
// each on a fresh fake served on loopback. It prints the table and returns
// the exit status.
func llmMain(o llmOptions) int {
	ds, err := pick(o.dialects, llmDialects(), dialectName)
	if err != nil {
		fail(err)
	}
	cls, err := pick(o.clients, llmClients(), llmClientName)
	if err != nil {
		fail(err)
	}
	cfg := o.cfg
	if llmNeedsRedis(cls) {
		addr, stop := mustStartRedis()
		defer stop()
		cfg.redis = addr
	}
	total := len(ds) * len(cls)
	fmt.Fprintf(os.Stderr, "bench -llm: %d runs of %v (period %v), about %v\n", total, cfg.duration, cfg.period,
		(time.Duration(total) * cfg.duration).Round(time.Second))
	var results []llmResult
	i := 0
	for _, d := range ds {
		for _, c := range cls {
			i++
			fmt.Fprintf(os.Stderr, "[%d/%d] %s × %s: ", i, total, d.name, c.name)
			r, err := runLoopback(d, c, cfg)
			if err != nil {
				fmt.Fprintf(os.Stderr, "error: %v\n", err)
				r = llmResult{Dialect: d.name, Client: c.name, Err: err.Error()}
			} else {
				fmt.Fprintf(os.Stderr, "%.3f of the token quota, %s refused (%s), %d calls, %d errors %v, big share %.2f, FIFO excess %s, too large sent %d of %d\n",
					r.Use, percent(r.Refused), refusedCell(r.RefusedBy), r.Calls, r.Errors, r.ErrorsBy, r.BigShare, signedDuration(r.FIFOExcess), r.TooLargeSent, r.TooLargeDrawn)
				if o.timeline {
					fmt.Fprint(os.Stderr, llmTimeline(r, cfg.period/12))
				}
			}
			results = append(results, r)
		}
	}
	writeLLMTable(os.Stdout, results, cfg)
	status := 0
	if o.jsonPath != "" {
		if err := writeLLMJSON(o.jsonPath, results, cfg); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			status = 1
		}
	}
	if o.check {
		if bad := llmFailures(results); len(bad) > 0 {
			fmt.Fprintln(os.Stderr, "bench: -check failed:")
			for _, b := range bad {
				fmt.Fprintln(os.Stderr, "  "+b)
			}
			status = 1
		}
	}
	return status
}

// runLoopback runs client c against a fresh fake of dialect d served on a
// loopback port, in real time.
func runLoopback(d llmDialect, c llmClient, cfg llmConfig) (llmResult, error) {
	api := d.newAPI(cfg.period)
	base, stop, err := serveLLM(api)
	if err != nil {
		return llmResult{}, err
	}
	tr := newTransport(cfg.workers)
	var closers []func()
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- { // the last registered first
			closers[i]()
		}
	}()
	rt := c.build(tr, llmClientConfig{dialect: d, period: cfg.period, fleet: cfg.fleet, redis: cfg.redis,
		cleanup: func(f func()) { closers = append(closers, f) }})
	rec := runLLM(api, d, &http.Client{Transport: rt}, base, cfg)
	tr.CloseIdleConnections()
	return summarizeLLM(d, c.name, cfg, rec), stop()
}

// serveLLM serves api on a loopback port, and returns its base URL (its
// scheme and host) and what stops it. Stopping it cuts the generations
// still running short with their connections: their decisions come after
// the run and are not recorded.
func serveLLM(api *llmfake.API) (base string, stop func() error, err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln) // ErrServerClosed once Close is called
	}()
	return "http://" + ln.Addr().String(), func() error {
		err := srv.Close()
		<-served
		return err
	}, nil
}
