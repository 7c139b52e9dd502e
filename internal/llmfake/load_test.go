package llmfake

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// handlerTransport answers in process with h.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, req)
	return rec.Result(), nil
}

// Counts counts every request decided on, and the refusals; Billed sums
// what the requests admitted in its span are billed.
func TestCountsAndBilled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := NewOpenAI(600, 60000)
		billed := Billed(api, time.Now(), time.Now().Add(time.Minute))
		require.Equal(t, http.StatusOK, llmCall(t, api, 400, 1000, 10).Code)               // 100 in, 10 out
		require.Equal(t, http.StatusTooManyRequests, llmCall(t, api, 400, 60000, 10).Code) // too large
		attempts, refused := api.Counts()
		assert.Equal(t, int64(2), attempts)
		assert.Equal(t, int64(1), refused)
		in, out := billed()
		assert.Equal(t, 100.0, in)
		assert.Equal(t, 10.0, out)
	})
}

// RunLoad's callers keep calling for the run's length and count the
// answers after skip; a failed call stops its caller and is told.
func TestRunLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := NewOpenAI(1e6, 1e9)
		mix := NewMix(1, 1<<30, false)
		load := RunLoad(handlerTransport{api}, "http://llm.test/v1/chat/completions", mix,
			func(d Draw) string { return d.Body("gpt-test", false, false) }, 4, time.Minute, 2*time.Minute)
		assert.Zero(t, load.Failed)
		attempts, _ := api.Counts()
		assert.Greater(t, load.Done, int64(0))
		assert.Less(t, load.Done, attempts, "the first minute's answers are not counted")
		assert.Greater(t, load.Estimated, load.Billed, "an estimate holds max_tokens, a bill what was generated")

		failing := RunLoad(roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, http.ErrHandlerTimeout }),
			"http://llm.test/", mix, func(Draw) string { return "{}" }, 3, 0, time.Minute)
		assert.Equal(t, int64(3), failing.Failed)
		assert.ErrorIs(t, failing.Err, http.ErrHandlerTimeout)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
