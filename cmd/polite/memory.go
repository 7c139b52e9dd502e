package main

import (
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"time"

	"github.com/politehttp/polite"
)

// memoryFlags say where get and inspect remember what polite learns of
// each host, across runs.
type memoryFlags struct {
	path string
	off  bool
}

// register defines -memory and -no-memory on fs.
func (f *memoryFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.path, "memory", "", "remember what polite learns of each host (its limit, a pause it asked for) in `FILE`, and start from it next time (default: polite/memory in the user's cache directory)")
	fs.BoolVar(&f.off, "no-memory", false, "start every host from nothing, and remember nothing")
}

// open returns the memory the flags ask for, or nil if none, and a
// function that writes it and lets it go. What goes wrong costs the run
// its memory, never the run: it is said in one line on stderr, prefixed
// with cmd.
func (f *memoryFlags) open(e *env, cmd string) (*polite.FileMemory, func()) {
	nothing := func() {}
	if f.off {
		return nil, nothing
	}
	path := f.path
	if path == "" {
		dir, err := e.cacheDir()
		if err != nil {
			fmt.Fprintf(e.stderr, "polite %s: no memory of the hosts (-memory FILE names one): %v\n", cmd, err)
			return nil, nothing
		}
		path = filepath.Join(dir, "polite", "memory")
	}
	mem, err := polite.OpenFileMemory(path)
	if err != nil {
		fmt.Fprintf(e.stderr, "polite %s: %v; those hosts start from nothing\n", cmd, err)
	}
	return mem, func() {
		if err := mem.Close(); err != nil {
			fmt.Fprintf(e.stderr, "polite %s: memory not written: %v\n", cmd, err)
		}
	}
}

// cacheDir returns the user's cache directory, as os.UserCacheDir does
// (tests give their own).
func (e *env) cacheDir() (string, error) {
	if e.userCacheDir == nil {
		return "", errors.New("no user cache directory")
	}
	return e.userCacheDir()
}

// describeMemory writes what a memory holds of a host, as of now.
func describeMemory(r polite.Remembered, ok bool, now time.Time) string {
	if !ok {
		return "nothing"
	}
	var s string
	switch {
	case r.Limit > 0 && r.Stated && r.Window > 0:
		s = fmt.Sprintf("limit %s requests/s (%s per %v, as the server stated)", number(r.Limit), number(r.Limit*r.Window.Seconds()), r.Window)
	case r.Limit > 0 && r.Stated:
		s = fmt.Sprintf("limit %s requests/s, as the server stated", number(r.Limit))
	case r.Limit > 0:
		s = fmt.Sprintf("limit %s requests/s, as polite measured from the server's throttles", number(r.Limit))
		if stood := r.At.Sub(r.Since); !r.Since.IsZero() && stood > 0 {
			s += fmt.Sprintf(" (it had stood %v)", stood.Round(time.Second))
		}
		if r.NoBurst {
			s += ", a server that lets no burst through"
		}
		if r.CountsRefusals {
			s += ", a server that counts the requests it refuses"
		}
	}
	if r.Limit > 0 {
		age := now.Sub(r.At)
		s += fmt.Sprintf(", %v ago", age.Round(time.Second))
		if age > polite.MemoryMaxAge {
			s += " (too old to be trusted: ignored)"
		}
	}
	if r.PausedUntil.After(now) {
		if s != "" {
			s += "; "
		}
		s += fmt.Sprintf("paused for %v more, as the server asked (until %s)", r.PausedUntil.Sub(now).Round(time.Second), r.PausedUntil.UTC().Format(time.RFC3339))
	}
	if s == "" {
		return "nothing still in force"
	}
	return s
}
