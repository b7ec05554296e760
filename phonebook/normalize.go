package phonebook

// Normalizer turns the ways a number is written into one form, so that
// "+39 0721 405516", "0039721405516" and "0721405516" compare equal (with
// Country "39", Trunk "0", Intl "00"). The normal form is the national
// significant number for numbers of the home country (country code and
// trunk prefix removed) and "+" and the digits for foreign ones.
//
// Separators (space, - . / and parentheses) are ignored; a number with any
// other character (a SIP URI, a name) has no normal form. The zero value
// only strips separators.
type Normalizer struct {
	Country string // home country calling code, digits only ("39")
	Trunk   string // national trunk prefix ("0"); "" when none
	Intl    string // international call prefix ("00"); "" when none
}

// maxNumber is the longest input that is normalised, in bytes.
const maxNumber = 64

// Normalize returns the normal form of s, or "" when s is not a number.
func (n Normalizer) Normalize(s string) string {
	var buf [maxNumber]byte
	return string(n.append(buf[:0], s))
}

// append appends the normal form of s to dst (at most len(s)+1 bytes);
// it appends nothing when s is not a number.
func (n Normalizer) append(dst []byte, s string) []byte {
	if len(s) > maxNumber {
		return dst
	}
	start := len(dst)
	plus := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			dst = append(dst, c)
		case c == '+' && !plus && len(dst) == start:
			plus = true
		case c == ' ' || c == '-' || c == '.' || c == '/' || c == '(' || c == ')' || c == '\t':
		default:
			return dst[:start]
		}
	}
	d := dst[start:]
	if len(d) == 0 {
		return dst[:start]
	}
	intl := plus
	if !intl && n.Intl != "" && hasPrefix(d, n.Intl) && len(d) > len(n.Intl) {
		d, intl = d[len(n.Intl):], true
	}
	if intl {
		if n.Country == "" || !hasPrefix(d, n.Country) {
			// Foreign: "+" and the digits, moved one byte right (copy
			// is a memmove, so the overlap is fine).
			off, ln := len(dst)-len(d), len(d)
			dst = append(dst, 0)
			copy(dst[start+1:start+1+ln], dst[off:off+ln])
			dst[start] = '+'
			return dst[:start+1+ln]
		}
		d = d[len(n.Country):]
	}
	if n.Trunk != "" && hasPrefix(d, n.Trunk) && len(d) > len(n.Trunk) {
		d = d[len(n.Trunk):]
	}
	return append(dst[:start], d...)
}

func hasPrefix(b []byte, p string) bool {
	return len(b) >= len(p) && string(b[:len(p)]) == p
}

// looksLikeNumber reports whether a search term should also match numbers.
func looksLikeNumber(s string) bool {
	digits := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits++
		case c == '+' || c == ' ' || c == '-' || c == '.' || c == '/' || c == '(' || c == ')':
		default:
			return false
		}
	}
	return digits > 0
}
