package proxy

import "bytes"

// maxHeldLine is the longest first data line of an event held to skip it
// unscanned; a longer one, or an event of several lines, is scanned as it
// passes.
const maxHeldLine = 16 << 10

// eventScan reads an event stream (text/event-stream) as its bytes pass:
// the data lines of each event make one JSON text, followed by a jsonScan,
// so that a line of any length costs no memory. Most events are one short
// line with no usage object: such a line is held, and scanned only if it
// may carry one.
type eventScan struct {
	line lineState
	// field is the start of the line's field name; fieldLen bytes of it.
	field    [len("data")]byte
	fieldLen int
	afterCR  bool // a '\n' right after '\r' ends no line
	hasData  bool // the event has a data line
	// held is the event's first data line while holding it.
	held    []byte
	holding bool
	scan    jsonScan
	// last is what the last event that carried a usage object said.
	last usageFound
}

type lineState uint8

const (
	lineField lineState = iota // the field name, up to ':'
	lineSpace                  // after "data:", an optional space
	lineData                   // the data, to the end of the line
	lineSkip                   // a line of another field, or a comment
)

// write reads the next bytes of the stream.
func (e *eventScan) write(p []byte) {
	for len(p) > 0 {
		c := p[0]
		if e.afterCR {
			e.afterCR = false
			if c == '\n' {
				p = p[1:]
				continue
			}
		}
		switch e.line {
		case lineData, lineSkip:
			n := bytes.IndexByte(p, '\n')
			if n < 0 {
				n = len(p)
			}
			if r := bytes.IndexByte(p[:n], '\r'); r >= 0 {
				n = r
			}
			if e.line == lineData {
				e.data(p[:n])
			}
			if p = p[n:]; len(p) > 0 {
				e.endLine()
				e.afterCR = p[0] == '\r'
				p = p[1:]
			}
			continue
		case lineSpace:
			e.line = lineData
			if c == ' ' {
				p = p[1:]
			}
			continue
		}
		switch {
		case c == '\r' || c == '\n':
			e.endLine()
			e.afterCR = c == '\r'
		case c == ':' && e.fieldLen == len(e.field) && string(e.field[:]) == "data":
			e.dataLine()
			e.line = lineSpace
		case e.fieldLen < len(e.field) && c == "data"[e.fieldLen]:
			e.field[e.fieldLen] = c
			e.fieldLen++
		default:
			e.line = lineSkip
		}
		p = p[1:]
	}
}

// dataLine starts a data line: the lines of one event are joined by a
// line feed, a space to JSON.
func (e *eventScan) dataLine() {
	if e.hasData {
		e.flush()
		e.scan.write([]byte{'\n'})
	} else {
		e.holding, e.held = true, e.held[:0]
	}
	e.hasData = true
}

// data takes bytes of a data line.
func (e *eventScan) data(p []byte) {
	if e.holding && len(e.held)+len(p) <= maxHeldLine {
		e.held = append(e.held, p...)
		return
	}
	e.flush()
	e.scan.write(p)
}

// flush scans the line held so far.
func (e *eventScan) flush() {
	if e.holding {
		e.holding = false
		e.scan.write(e.held)
	}
}

// endLine ends a line; an empty one ends the event.
func (e *eventScan) endLine() {
	switch {
	case e.line == lineField && e.fieldLen == 0:
		e.dispatch()
	case e.line == lineField && e.fieldLen == len(e.field):
		e.dataLine() // "data" alone is an empty data line
	}
	e.line, e.fieldLen = lineField, 0
}

// dispatch ends an event: one that carries a usage object replaces what
// the events before it said. Others ("usage":null, [DONE]) change nothing.
func (e *eventScan) dispatch() {
	if e.holding && !mayCarryUsage(e.held) {
		e.hasData = false
	}
	if e.hasData {
		e.flush()
		e.scan.end()
		if e.scan.usageObject() {
			e.last = found(&e.scan)
		}
	}
	e.hasData, e.holding = false, false
	e.scan.reset()
}

// mayCarryUsage reports whether a JSON line may have a usage member whose
// value is not null. A name that decodes to "usage" is written as the
// five letters in a row, or has one escaped (\u0061, \u0065, \u0067,
// \u0073 or \u0075); written in a row, it is followed by its closing
// quote, the colon and the value.
func mayCarryUsage(line []byte) bool {
	if bytes.Contains(line, []byte(`\u006`)) || bytes.Contains(line, []byte(`\u007`)) {
		return true
	}
	for {
		i := bytes.Index(line, []byte("usage"))
		if i < 0 {
			return false
		}
		line = line[i+len("usage"):]
		rest, ok := bytes.CutPrefix(line, []byte(`"`))
		rest = bytes.TrimLeft(rest, " \t")
		rest, colon := bytes.CutPrefix(rest, []byte(":"))
		if !ok || !colon || !bytes.HasPrefix(bytes.TrimLeft(rest, " \t"), []byte("null")) {
			return true
		}
	}
}

// end ends the stream; an event it cut short is read as it stands.
func (e *eventScan) end() usageFound {
	e.dispatch()
	return e.last
}
