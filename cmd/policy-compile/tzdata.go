package main

// The time zone database is embedded, so that calendar limits resolve their
// zones in an image without one (scratch, distroless static).
import _ "time/tzdata"
