package main

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// termSafe is the one rule for every string `pvans list` and `pvans query`
// print that the network chose: names any host can send in a search,
// endpoints, GUIDs, probe errors, an API's error text. A terminal obeys
// control bytes, so a name holding ESC [ 2 J would clear the operator's
// screen, one holding OSC would set the window title, one holding a
// newline or a tab would forge rows and columns. Each such byte is shown
// as an escape instead, visibly and unambiguously:
//
//   - C0 controls and DEL as \xHH (ESC is \x1b, a newline \x0a, a tab \x09);
//   - a byte that is not UTF-8 as \xHH;
//   - C1 controls (U+0080–U+009F, which some terminals obey as 8-bit
//     CSI and OSC), format characters such as the bidirectional overrides
//     (U+202E shows text backwards) and the line and paragraph separators
//     as \u{HHHH};
//   - the backslash itself as \\, so a name holding the four characters
//     \x1b is not mistaken for one holding ESC.
//
// Everything else, UTF-8 letters of any script included, is printed as is.
func termSafe(s string) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\\':
			b.WriteString(`\\`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u{%04x}`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// printRow writes one table row, every cell through termSafe: the cells
// hold what hosts on the network chose (names, endpoints, errors), and
// only the tabs and the newline between them are the table's own.
func printRow(w io.Writer, cells ...string) {
	for i, c := range cells {
		cells[i] = termSafe(c)
	}
	_, _ = io.WriteString(w, strings.Join(cells, "\t")+"\n")
}

// unsafeRune: a character above ASCII that a terminal acts on or that
// changes how the text around it is shown.
func unsafeRune(r rune) bool {
	return unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Zl, r) || unicode.Is(unicode.Zp, r)
}

func needsEscape(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == '\\' || r == utf8.RuneError || (r >= 0x80 && unsafeRune(r)) {
			return true
		}
	}
	return false
}

// termSafeJSON makes an API answer printed by --json safe for a terminal
// under the same rule, and still the same JSON: encoding/json escapes C0
// controls and replaces invalid UTF-8, but writes C1 controls and format
// characters raw. Those can only stand inside JSON strings, where \uHHHH
// means the same character.
func termSafeJSON(body []byte) []byte {
	if !bytes.ContainsFunc(body, jsonUnsafe) {
		return body
	}
	var b bytes.Buffer
	for i := 0; i < len(body); {
		r, n := utf8.DecodeRune(body[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			b.WriteString(`\ufffd`) // not JSON; shown, not obeyed
		case !jsonUnsafe(r):
			b.Write(body[i : i+n])
		case r > 0xffff:
			r1, r2 := utf16Pair(r)
			fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += n
	}
	return b.Bytes()
}

// jsonUnsafe: a character termSafe would escape, but JSON's own
// whitespace between values; a byte that is not UTF-8 decodes as
// utf8.RuneError.
func jsonUnsafe(r rune) bool {
	switch {
	case r == '\n' || r == '\t' || r == '\r':
		return false
	case r < 0x20 || r == 0x7f || r == utf8.RuneError:
		return true
	}
	return r >= 0x80 && unsafeRune(r)
}

// utf16Pair is r as a UTF-16 surrogate pair, as JSON escapes a character
// beyond U+FFFF (a few format characters, e.g. U+E0001 LANGUAGE TAG).
func utf16Pair(r rune) (rune, rune) {
	r -= 0x10000
	return 0xd800 + (r>>10)&0x3ff, 0xdc00 + r&0x3ff
}
