package politecost

import "math"

// Defaults of the options. Each option's documentation repeats its default.
const (
	// DefaultMaxTokens is the output a request to an LLM API is charged
	// for when it sets no maximum (max_tokens, max_completion_tokens,
	// max_output_tokens): the server then reserves the model's maximum
	// output, which this package cannot know, and 4,096 is the output cap
	// of many models and the fallback LiteLLM uses.
	DefaultMaxTokens = 4096
	// DefaultPoints is what a Shopify GraphQL query is charged before
	// Shopify has stated its cost: 10 points, a mutation's documented
	// cost. It is small, so that it fits the smallest bucket (a charge
	// above the bucket's size fails at once, with a *polite.CostError);
	// the first answer to each query tells its cost.
	DefaultPoints = 10
)

// An Option configures a dialect of this package.
type Option func(*settings)

// settings is what the options set.
type settings struct {
	maxTokens float64
	points    float64
}

// newSettings returns the settings opts make from the defaults.
func newSettings(opts []Option) settings {
	s := settings{maxTokens: DefaultMaxTokens, points: DefaultPoints}
	for _, o := range opts {
		if o != nil {
			o(&s)
		}
	}
	return s
}

// WithDefaultMaxTokens sets the output a request to an LLM API
// ([OpenAI], [AzureOpenAI], [Anthropic]) is charged for when it sets no
// maximum of its own: set it to the model's maximum output, which is what
// the server reserves. Default: [DefaultMaxTokens]. A negative, NaN or
// infinite n is ignored.
func WithDefaultMaxTokens(n float64) Option {
	return func(s *settings) {
		if n >= 0 && !math.IsInf(n, 1) {
			s.maxTokens = n
		}
	}
}

// WithDefaultPoints sets what a [ShopifyGraphQL] query is charged before
// Shopify has stated the cost of that query, when the caller states none
// ([polite.ContextWithCost]). Default: [DefaultPoints]. A value that is
// not a positive finite number is ignored.
func WithDefaultPoints(points float64) Option {
	return func(s *settings) {
		if points > 0 && !math.IsInf(points, 1) {
			s.points = points
		}
	}
}
