package politecost

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testdata returns the file name of testdata/.
func testdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return b
}

// post returns a POST of body to url, its GetBody set.
func post(t testing.TB, url, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	return req
}

// answer returns a response to req with the content type ct (none if "").
func answer(req *http.Request, ct string) *http.Response {
	resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Request: req}
	if ct != "" {
		resp.Header.Set("Content-Type", ct)
	}
	return resp
}

// tailOf returns the last MaxUsageTail bytes of b at most, as polite
// gives them to a UsageReader.
func tailOf(b []byte) []byte {
	const most = 64 << 10
	if len(b) > most {
		return b[len(b)-most:]
	}
	return b
}
