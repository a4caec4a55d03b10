//! Pagination: `page` (1-based) and `per_page` from a query, and the
//! `LIMIT`/`OFFSET` they mean.

use crate::ApiError;

/// Rows per page when `per_page` is absent.
pub const DEFAULT_PER_PAGE: i64 = 50;
/// The most rows per page.
pub const MAX_PER_PAGE: i64 = 200;
/// The last page number accepted (bounds the offset).
pub const MAX_PAGE: i64 = 1_000_000;

/// A page of a listing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Page {
    /// 1-based page number.
    pub page: i64,
    /// Rows per page.
    pub per_page: i64,
}

impl Page {
    /// From the query's `page` and `per_page` (absent: 1 and 50).
    pub fn parse(page: Option<&str>, per_page: Option<&str>) -> Result<Self, ApiError> {
        let number = |field: &str, v: Option<&str>, default: i64, max: i64| match v {
            None | Some("") => Ok(default),
            Some(v) => match v.parse::<i64>() {
                Ok(n) if (1..=max).contains(&n) => Ok(n),
                _ => Err(ApiError::bad(
                    field,
                    format!("must be a whole number from 1 to {max}"),
                )),
            },
        };
        Ok(Self {
            page: number("page", page, 1, MAX_PAGE)?,
            per_page: number("per_page", per_page, DEFAULT_PER_PAGE, MAX_PER_PAGE)?,
        })
    }

    /// Rows skipped before this page.
    pub fn offset(&self) -> i64 {
        (self.page - 1) * self.per_page
    }

    /// Pages needed for `total` rows (at least 1).
    pub fn pages(&self, total: i64) -> i64 {
        ((total + self.per_page - 1) / self.per_page).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_bounds() {
        let p = Page::parse(None, None).unwrap();
        assert_eq!((p.page, p.per_page, p.offset()), (1, 50, 0));
        let p = Page::parse(Some("3"), Some("200")).unwrap();
        assert_eq!(p.offset(), 400);
        assert_eq!(p.pages(0), 1);
        assert_eq!(p.pages(200), 1);
        assert_eq!(p.pages(201), 2);
        for (page, per) in [
            ("0", "1"),
            ("-1", "1"),
            ("1", "0"),
            ("1", "201"),
            ("x", "1"),
            ("1", "1.5"),
        ] {
            let e = Page::parse(Some(page), Some(per)).unwrap_err();
            assert_eq!(e.status, 400);
            assert!(e.field == Some("page".into()) || e.field == Some("per_page".into()));
        }
        assert_eq!(
            Page::parse(Some("1"), Some("999"))
                .unwrap_err()
                .field
                .as_deref(),
            Some("per_page")
        );
        assert!(Page::parse(Some("1000001"), None).is_err());
    }
}
