package policyfile

import (
	"strconv"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// quoteStatusesMessage is what an unquoted HTTP status is refused with. The
// API server says only that the value "must be of type string", and checks
// none of the CEL rules after it; a file says how to fix it, and checks
// the rest of the policy as if the statuses were quoted.
const quoteStatusesMessage = `write HTTP statuses as quoted strings, such as "401" or "5xx"`

// quoteStatuses turns the numbers of every countResponses.statuses list of
// obj into strings, so that the rest of the policy can be validated, and
// returns an error for each.
func quoteStatuses(obj map[string]any) field.ErrorList {
	spec, _ := obj["spec"].(map[string]any)
	rules, _ := spec["rules"].([]any)
	var errs field.ErrorList
	for i, r := range rules {
		rule, _ := r.(map[string]any)
		count, _ := rule["countResponses"].(map[string]any)
		statuses, _ := count["statuses"].([]any)
		for j, s := range statuses {
			var quoted string
			switch v := s.(type) {
			case int64:
				quoted = strconv.FormatInt(v, 10)
			case float64:
				quoted = strconv.FormatFloat(v, 'f', -1, 64)
			default:
				continue
			}
			statuses[j] = quoted
			path := field.NewPath("spec", "rules").Index(i).Child("countResponses", "statuses").Index(j)
			errs = append(errs, field.TypeInvalid(path, s, quoteStatusesMessage))
		}
	}
	return errs
}
