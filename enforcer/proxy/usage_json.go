package proxy

// maxUsageObject is the most held of a usage value; the rest of a JSON
// text is followed without being held, however long its strings.
const maxUsageObject = 64 << 10

// maxJSONDepth is the deepest nesting accepted, as encoding/json's.
const maxJSONDepth = 10000

// jsonScan follows one JSON text as its bytes pass, the way a streaming
// parser does: it checks the grammar, keeps one bit a level of nesting,
// and holds only the raw value of the last top-level "usage" member.
type jsonScan struct {
	state scanState
	// levels has bit d set when level d is an object; depth levels are open.
	levels []uint64
	depth  int
	lit    string // what a true, false or null still needs
	hex    int    // hex digits a \u escape still needs
	code   rune   // the \u escape's value so far
	// key is a member name being read, inName one of the top-level
	// object; name is the start of it, decoded, and named that it is "usage".
	key      bool
	inName   bool
	name     [len("usage")]byte
	nameLen  int
	nameLong bool
	named    bool
	// capturing is the usage value being read, from capStart of the
	// current write.
	capturing bool
	capStart  int
	// usage is the raw value of the last top-level usage member read
	// whole; overflow that it did not fit maxUsageObject.
	usage     []byte
	usageKind byte // its first byte: '{' for an object
	hasUsage  bool
	overflow  bool
	invalid   bool
	done      bool // the top-level value has ended
}

type scanState uint8

const (
	scanValue       scanState = iota // a value starts
	scanFirstMember                  // after '{': a name or '}'
	scanMember                       // after ',' in an object: a name
	scanColon
	scanFirstElement // after '[': a value or ']'
	scanAfter        // after a value: ',', a close, or the end
	scanString
	scanEscape
	scanHex
	scanMinus
	scanZero
	scanInt
	scanDot
	scanFrac
	scanExp
	scanExpSign
	scanExpDigits
	scanLiteral
)

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// reset makes s ready for a new text, keeping its memory.
func (s *jsonScan) reset() {
	*s = jsonScan{levels: s.levels[:0], usage: s.usage[:0]}
}

// inObject reports whether the innermost open level is an object.
func (s *jsonScan) inObject() bool {
	d := s.depth - 1
	return s.levels[d/64]&(1<<(d%64)) != 0
}

func (s *jsonScan) open(object bool) {
	if s.depth == maxJSONDepth {
		s.invalid = true
		return
	}
	d := s.depth
	if d/64 == len(s.levels) {
		s.levels = append(s.levels, 0)
	}
	if object {
		s.levels[d/64] |= 1 << (d % 64)
	} else {
		s.levels[d/64] &^= 1 << (d % 64)
	}
	s.depth++
}

// write follows the next bytes of the text.
func (s *jsonScan) write(p []byte) {
	for i := 0; i < len(p) && !s.invalid; {
		c := p[i]
		switch s.state {
		case scanString:
			if !s.inName {
				// the bulk of an answer: run to the next quote or escape
				j := i
				for j < len(p) && p[j] >= 0x20 && p[j] != '"' && p[j] != '\\' {
					j++
				}
				if i = j; i == len(p) {
					continue
				}
				c = p[i]
			}
			switch {
			case c == '"':
				s.endString(p, i)
			case c == '\\':
				s.state = scanEscape
			case c < 0x20:
				s.invalid = true
			default:
				s.nameByte(rune(c))
			}
		case scanEscape:
			s.state = scanString
			switch c {
			case '"', '\\', '/':
				s.nameByte(rune(c))
			case 'b', 'f', 'n', 'r', 't':
				s.nameByte(0x80) // not in "usage"
			case 'u':
				s.state, s.hex, s.code = scanHex, 4, 0
			default:
				s.invalid = true
			}
		case scanHex:
			var v byte
			switch {
			case c >= '0' && c <= '9':
				v = c - '0'
			case c >= 'a' && c <= 'f':
				v = c - 'a' + 10
			case c >= 'A' && c <= 'F':
				v = c - 'A' + 10
			default:
				s.invalid = true
				continue
			}
			s.code, s.hex = s.code<<4|rune(v), s.hex-1
			if s.hex == 0 {
				s.state = scanString
				s.nameByte(s.code)
			}
		case scanValue, scanFirstElement:
			if isSpace(c) {
				break
			}
			if c == ']' && s.state == scanFirstElement {
				s.close(p, i)
				break
			}
			s.startValue(p, i)
		case scanFirstMember, scanMember:
			switch {
			case isSpace(c):
			case c == '"':
				s.state, s.key = scanString, true
				if s.inName = s.depth == 1; s.inName {
					s.nameLen, s.nameLong = 0, false
				}
			case c == '}' && s.state == scanFirstMember:
				s.close(p, i)
			default:
				s.invalid = true
			}
		case scanColon:
			switch {
			case isSpace(c):
			case c == ':':
				s.state = scanValue
			default:
				s.invalid = true
			}
		case scanAfter:
			switch {
			case isSpace(c):
			case s.depth == 0:
				s.invalid = true // only spaces may follow the text
			case c == ',':
				s.state = scanValue
				if s.inObject() {
					s.state = scanMember
				}
			case c == '}' && s.inObject(), c == ']' && !s.inObject():
				s.close(p, i)
			default:
				s.invalid = true
			}
		case scanLiteral:
			if c != s.lit[0] {
				s.invalid = true
				continue
			}
			if s.lit = s.lit[1:]; s.lit == "" {
				s.endValue(p, i+1)
			}
		default:
			if !s.number(c) {
				s.endValue(p, i)
				continue // c follows the number
			}
		}
		i++
	}
	if s.capturing && !s.invalid {
		s.keep(p[s.capStart:])
		s.capStart = 0
	}
}

// startValue begins the value whose first byte is p[i].
func (s *jsonScan) startValue(p []byte, i int) {
	if s.named {
		s.named, s.capturing, s.capStart = false, true, i
		s.usage, s.usageKind, s.hasUsage, s.overflow = s.usage[:0], p[i], false, false
	}
	switch c := p[i]; c {
	case '{':
		s.open(true)
		s.state = scanFirstMember
	case '[':
		s.open(false)
		s.state = scanFirstElement
	case '"':
		s.state, s.key, s.inName = scanString, false, false
	case '-':
		s.state = scanMinus
	case '0':
		s.state = scanZero
	case 't':
		s.state, s.lit = scanLiteral, "true"[1:]
	case 'f':
		s.state, s.lit = scanLiteral, "false"[1:]
	case 'n':
		s.state, s.lit = scanLiteral, "null"[1:]
	default:
		if c < '1' || c > '9' {
			s.invalid = true
		}
		s.state = scanInt
	}
}

// number takes the next byte of a number, or reports that it is not one.
func (s *jsonScan) number(c byte) bool {
	digit := c >= '0' && c <= '9'
	switch s.state {
	case scanMinus:
		switch {
		case c == '0':
			s.state = scanZero
		case digit:
			s.state = scanInt
		default:
			s.invalid = true
		}
		return true
	case scanZero, scanInt, scanFrac:
		switch {
		case digit && s.state != scanZero:
		case c == '.' && s.state != scanFrac:
			s.state = scanDot
		case c == 'e' || c == 'E':
			s.state = scanExp
		default:
			if digit {
				s.invalid = true // 01
			}
			return digit
		}
	case scanDot:
		s.state = scanFrac
		s.invalid = !digit
	case scanExp:
		if c == '+' || c == '-' {
			s.state = scanExpSign
			return true
		}
		s.state = scanExpDigits
		s.invalid = !digit
	case scanExpSign:
		s.state = scanExpDigits
		s.invalid = !digit
	case scanExpDigits:
		return digit
	}
	return true
}

// nameByte adds a decoded character to the member name being read.
func (s *jsonScan) nameByte(r rune) {
	if !s.inName {
		return
	}
	if s.nameLen == len(s.name) || r >= 0x80 {
		s.nameLong = true
		return
	}
	s.name[s.nameLen] = byte(r)
	s.nameLen++
}

// endString ends the string whose closing quote is p[i].
func (s *jsonScan) endString(p []byte, i int) {
	if !s.key {
		s.endValue(p, i+1)
		return
	}
	s.state = scanColon
	s.named = s.inName && !s.nameLong && s.nameLen == len(s.name) && string(s.name[:]) == "usage"
	s.key, s.inName = false, false
}

// close ends the object or array whose closing byte is p[i].
func (s *jsonScan) close(p []byte, i int) {
	s.depth--
	s.endValue(p, i+1)
}

// endValue ends a value whose last byte is p[end-1].
func (s *jsonScan) endValue(p []byte, end int) {
	s.state = scanAfter
	if s.depth == 0 {
		s.done = true
	}
	if s.capturing && s.depth == 1 {
		s.keep(p[s.capStart:end])
		s.capturing, s.hasUsage = false, true
	}
}

// keep holds part of the usage value, up to maxUsageObject.
func (s *jsonScan) keep(b []byte) {
	if s.overflow || len(s.usage)+len(b) > maxUsageObject {
		s.overflow, s.usage = true, s.usage[:0]
		return
	}
	s.usage = append(s.usage, b...)
}

// end ends the text: a number at the top level ends here.
func (s *jsonScan) end() {
	if s.depth == 0 && !s.done && !s.invalid {
		switch s.state {
		case scanZero, scanInt, scanFrac, scanExpDigits:
			s.done = true
		}
	}
}

// valid reports whether the bytes written were one whole JSON text.
func (s *jsonScan) valid() bool { return s.done && !s.invalid }

// usageObject reports whether the last usage value read is an object.
func (s *jsonScan) usageObject() bool { return s.hasUsage && s.usageKind == '{' }
