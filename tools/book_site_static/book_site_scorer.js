/* The book's search scores (tools/book_site.py sets html_search_scorer to this file).
 *
 * Sphinx's default weights, and one change: a result on the API reference page loses API_PENALTY points. With the
 * defaults every function of the API whose name holds the query ("yarn" in course_pe.rope_scaling.yarn_*) scored
 * 6 (part of the name) + 5 (a Python object), above a chapter that only mentions it in its text (5): a search for
 * "YaRN" listed four API entries before the chapter that explains YaRN. Now a partial name match on the API page
 * scores 4, below any chapter that has the word; an exact object name (11 + 5 - 7 = 9) still ranks above a chapter's
 * text, and a chapter whose title has the word (15) above both.
 */
var API_DOC = "book/reference/api";
var API_PENALTY = 7;
var Scorer = {
  score: function (result) {
    var docname = result[0], score = result[4];
    return docname === API_DOC ? score - API_PENALTY : score;
  },
  objNameMatch: 11,
  objPartialMatch: 6,
  objPrio: {0: 15, 1: 5, 2: -5},
  objPrioDefault: 0,
  title: 15,
  partialTitle: 7,
  term: 5,
  partialTerm: 2
};
