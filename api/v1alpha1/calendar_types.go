/*
Copyright 2026 The Sluice Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package v1alpha1

// CalendarUnit is the length of a calendar window.
// +kubebuilder:validation:Enum=Day;Week;Month;Year
type CalendarUnit string

const (
	// CalendarDay resets at local midnight.
	CalendarDay CalendarUnit = "Day"
	// CalendarWeek resets at local midnight of weekStart.
	CalendarWeek CalendarUnit = "Week"
	// CalendarMonth resets at local midnight of the 1st.
	CalendarMonth CalendarUnit = "Month"
	// CalendarYear resets at local midnight of January 1st.
	CalendarYear CalendarUnit = "Year"
)

// Weekday names a day of the week.
// +kubebuilder:validation:Enum=Monday;Tuesday;Wednesday;Thursday;Friday;Saturday;Sunday
type Weekday string

// Calendar aligns a limit's window to the calendar of a time zone: a quota
// per day, week, month or year that resets at local midnight (of the 1st,
// for a month), however long the window is: 23 or 25 hours on the days of a
// daylight-saving change, 28 to 31 days for a month. Where a zone skips
// midnight, the day starts at its first instant. Changing timeZone starts a
// new window, counted from zero, at the change.
// +kubebuilder:validation:XValidation:rule="!has(self.weekStart) || self.unit == 'Week'",message="weekStart is for unit Week only: remove weekStart, or set unit to Week"
type Calendar struct {
	// Unit is the length of the window: Day, Week, Month or Year.
	Unit CalendarUnit `json:"unit"`

	// TimeZone is the IANA time zone whose midnight starts each window,
	// such as Europe/Berlin or America/New_York. Omitted, UTC.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self == 'UTC' || self.matches('^[A-Za-z][-+_A-Za-z0-9]*(/[A-Za-z0-9][-+_A-Za-z0-9]*){0,2}$')",message="timeZone must be an IANA time zone name such as Europe/Berlin, America/New_York or UTC (letters, digits, '-', '+' and '_', in up to three parts separated by '/')"
	// +optional
	TimeZone string `json:"timeZone,omitempty"`

	// WeekStart is the first day of a Week window. Omitted, Monday.
	// +optional
	WeekStart Weekday `json:"weekStart,omitempty"`
}
