// The search rule of explorer/view/search.py, over the words Python ships per element.

/** Every term must match: "%5" the id exactly, any other term a substring of a word. */
export function matches(words: string, query: string): boolean {
  const terms = query.toLowerCase().split(/\s+/).filter((t) => t.length > 0);
  if (terms.length === 0) return false;
  const tokens = words.split(/\s+/);
  return terms.every((term) =>
    term.startsWith("%") ? tokens.includes(term) : tokens.some((t) => t.includes(term)),
  );
}

/** The element keys whose words match the query, in key order. */
export function findHits(words: Record<string, string>, query: string): string[] {
  return Object.keys(words)
    .filter((k) => matches(words[k], query))
    .sort();
}
