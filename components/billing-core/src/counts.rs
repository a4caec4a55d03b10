//! Remembered totals. A listing's total without a search or dates is a
//! sum of `client_counts` rows; with them it is a count of the dealer's
//! matching rows, which costs a walk of every client of the dealer. Such
//! a total is kept in `count_cache`, one slot per dealer and hash of the
//! filter, and used again (paging, sorting, reloading) while it is valid:
//! counted at the dealer's current generation (bumped in the transaction
//! of every change to the dealer's clients) and at most [`TTL_MS`] ago (a
//! change made outside the app is seen within that). Slots per dealer are
//! fixed ([`SLOTS`]), so the table stays small whatever is searched.
//!
//! On MariaDB a searched total comes with the matching ids when they are
//! at most [`MAX_IDS`]: the pages of that search (the next page, another
//! sort) are then read by walking the sort column's index and keeping
//! those ids (`ClientQuery::walk_ids`), or by looking them up, instead of
//! scanning the dealer's search index again or looking up every row a
//! walk passes for its search text (MariaDB's sort indexes cannot hold
//! it: see `ClientQuery::matches_first_is_cheaper`).

use crate::Param;
use crate::query::{ClientQuery, fold};

/// Slots per dealer.
pub const SLOTS: u64 = 512;

/// How long a remembered total is used, at most.
pub const TTL_MS: i64 = 60_000;

/// The most matching ids remembered with a total (their text stays under
/// MariaDB's 64 KiB TEXT).
pub const MAX_IDS: usize = 4_000;

/// Where a listing's total is remembered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheKey {
    /// The dealer every counted row belongs to.
    pub dealer: i64,
    /// The slot: the filter's hash, modulo [`SLOTS`].
    pub slot: i64,
    /// The filter, in full (a slot's other filter is a miss).
    pub filter: String,
}

/// The dealer's generation, the total remembered for `key` if valid, the
/// dealer's count of clients and the matching ids remembered with the
/// total, if any (parameters from [`lookup_params`]): one row, its second
/// column NULL when no total is remembered.
pub const LOOKUP: &str = "SELECT COALESCE(g.generation, 0), cc.total, (SELECT COALESCE(SUM(n), 0) FROM client_counts n WHERE n.dealer_id = x.dealer_id), cc.ids FROM (SELECT ? AS dealer_id) x LEFT JOIN client_generations g ON g.dealer_id = x.dealer_id LEFT JOIN count_cache cc ON cc.dealer_id = x.dealer_id AND cc.slot = ? AND cc.filter = ? AND cc.generation = COALESCE(g.generation, 0) AND cc.made_at > ?";

/// [`LOOKUP`]'s parameters at `now_ms`.
pub fn lookup_params(key: &CacheKey, now_ms: i64) -> Vec<Param> {
    vec![
        Param::Int(key.dealer),
        Param::Int(key.slot),
        Param::Text(key.filter.clone()),
        Param::Int(now_ms - TTL_MS),
    ]
}

/// `Dialect::store_count`'s parameters: the total, and the matching ids
/// if they are kept.
pub fn store_params(
    key: &CacheKey,
    generation: i64,
    total: i64,
    ids: Option<&[i64]>,
    now_ms: i64,
) -> Vec<Param> {
    vec![
        Param::Int(key.dealer),
        Param::Int(key.slot),
        Param::Text(key.filter.clone()),
        Param::Int(generation),
        Param::Int(total),
        ids.map(|ids| Param::Text(ids_text(ids)))
            .unwrap_or(Param::Null),
        Param::Int(now_ms),
    ]
}

/// Ids as stored: decimal, comma-separated.
pub fn ids_text(ids: &[i64]) -> String {
    ids.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
}

/// Ids from their stored text (`None` if it is not that).
pub fn parse_ids(text: &str) -> Option<Vec<i64>> {
    if text.is_empty() {
        return Some(Vec::new());
    }
    text.split(',').map(|n| n.parse().ok()).collect()
}

/// Where `q`'s total is remembered, for a session scoped to `scope`;
/// `None` when it is not: totals read from `client_counts` (cheap
/// already) and totals over every dealer (an admin's, without a dealer).
pub fn key(q: &ClientQuery, scope: Option<i64>) -> Option<CacheKey> {
    if !q.counts_rows() {
        return None;
    }
    let dealer = scope.or(q.dealer)?;
    let opt = |v: Option<i64>| v.map(|v| v.to_string()).unwrap_or_default();
    // The filter as the count's WHERE reads it: the folded search, the
    // tariff, the dates (a separator no search holds: it is one line).
    let filter = format!(
        "{}\n{}\n{}\n{}",
        q.q.as_deref().map(fold).unwrap_or_default(),
        opt(q.tariff),
        opt(q.from_ms),
        opt(q.until_ms)
    );
    Some(CacheKey {
        dealer,
        slot: (fnv1a(filter.as_bytes()) % SLOTS) as i64,
        filter,
    })
}

/// FNV-1a, 64 bits: stable across builds and databases.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::parse_query;

    fn q(s: &str, admin: bool) -> ClientQuery {
        ClientQuery::parse(&parse_query(s).unwrap(), admin).unwrap()
    }

    #[test]
    fn only_counted_totals_of_one_dealer_are_kept() {
        assert_eq!(key(&q("sort=name&page=2", false), Some(3)), None);
        assert_eq!(key(&q("tariff=2", false), Some(3)), None);
        assert_eq!(key(&q("q=anna", true), None), None);
        let k = key(&q("q=anna", true), Some(3)).unwrap();
        assert_eq!(k.dealer, 3);
        let k = key(&q("q=anna&dealer=4", true), None).unwrap();
        assert_eq!(k.dealer, 4);
        // A dealer's scope wins over any dealer parameter.
        let k = key(&q("q=anna&dealer=4", false), Some(3)).unwrap();
        assert_eq!(k.dealer, 3);
    }

    #[test]
    fn the_filter_decides_the_key_not_the_page_or_sort() {
        let a = key(&q("q=Anna&sort=name&page=1", false), Some(1)).unwrap();
        let b = key(&q("q=anna&sort=-phone&page=7&per_page=10", false), Some(1)).unwrap();
        assert_eq!(a, b);
        for other in [
            "q=anna&tariff=2",
            "q=ann",
            "q=anna&registered_from=2025-01-01",
            "q=anna&registered_to=2025-01-01",
        ] {
            assert_ne!(
                key(&q(other, false), Some(1)).unwrap().filter,
                a.filter,
                "{other}"
            );
        }
        // Dates alone count rows too.
        let d = key(&q("registered_from=2025-01-01", false), Some(1)).unwrap();
        assert_eq!(d.filter, "\n\n1735689600000\n");
        assert!((0..SLOTS as i64).contains(&d.slot));
    }

    #[test]
    fn ids_round_trip() {
        for ids in [vec![], vec![7], vec![1, 22, 333]] {
            assert_eq!(parse_ids(&ids_text(&ids)), Some(ids));
        }
        assert_eq!(parse_ids("1,x"), None);
        let k = key(&q("q=anna", false), Some(1)).unwrap();
        assert_eq!(
            store_params(&k, 3, 2, Some(&[4, 5]), 9)[5],
            Param::Text("4,5".into())
        );
        assert_eq!(store_params(&k, 3, 2, None, 9)[5], Param::Null);
    }

    #[test]
    fn fnv1a_is_the_published_one() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
