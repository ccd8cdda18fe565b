// Package glob is the one wildcard matcher of pvans: for name patterns in
// the access lists (config.NamePattern) and for the name listings of the
// API and `pvans list --names` (registry.Names). '*' matches any run of
// characters, '?' exactly one character (a UTF-8 sequence, so one
// non-ASCII character in a description-like name is one '?'); every other
// character, ':' and '.' included, matches itself. It owns no parsing of
// lists and no regular expressions.
package glob

import "unicode/utf8"

// Has reports whether pattern has a wildcard.
func Has(pattern string) bool {
	for i := 0; i < len(pattern); i++ {
		if pattern[i] == '*' || pattern[i] == '?' {
			return true
		}
	}
	return false
}

// Match reports whether s matches pattern as a whole. It backtracks only
// to the last '*', so it runs in O(len(pattern)·len(s)) at worst and
// allocates nothing: a hostile pattern on the HTTP API costs time bounded
// by the caller's deadline, never memory.
func Match(pattern, s string) bool {
	px, sx, starP, starS := 0, 0, -1, 0
	for sx < len(s) {
		if px < len(pattern) {
			switch c := pattern[px]; c {
			case '*':
				starP, starS = px, sx
				px++
				continue
			case '?':
				_, n := utf8.DecodeRuneInString(s[sx:])
				px++
				sx += n
				continue
			default:
				if c == s[sx] {
					px++
					sx++
					continue
				}
			}
		}
		if starP < 0 {
			return false
		}
		// The last '*' takes one more character and the rest is tried
		// again after it.
		_, n := utf8.DecodeRuneInString(s[starS:])
		starS += n
		px, sx = starP+1, starS
	}
	for px < len(pattern) && pattern[px] == '*' {
		px++
	}
	return px == len(pattern)
}
