//! What an address request lets through: which kinds of entry (DaData's
//! `from_bound` / `to_bound`: a city field wants cities, a street field
//! streets) and where (DaData's `locations`: the street field of a form
//! whose city is already chosen).
//!
//! Names compare folded (case, diacritics, `ё`), whole: `{"city":
//! "москва"}` is Москва, not Московский.
//!
//! ```
//! use hints_engine::address::{AddressIndex, build_address_index};
//! use hints_engine::restrict::{Kinds, Location, Restrict};
//!
//! let data = r#"
//! {"kind":"place","id":"gn:1","name":"Москва","type":"г","country":"Россия","country_iso_code":"RU","population":12000000}
//! {"kind":"place","id":"gn:2","name":"Хабаровск","type":"г","country":"Россия","country_iso_code":"RU","population":600000}
//! {"kind":"street","id":"s:1","parent":"gn:1","name":"Мира","type":"пр-кт","house_range":[1,3]}
//! {"kind":"street","id":"s:2","parent":"gn:2","name":"Мира","type":"ул","house_range":[1,3]}
//! "#;
//! let (bytes, _) = build_address_index(data.trim().as_bytes()).unwrap();
//! let ix = AddressIndex::open(&bytes).unwrap();
//! let streets_of_khabarovsk = Restrict::new(
//!     Some(Kinds { places: false, streets: true, houses: false }),
//!     vec![Location { city: Some("Хабаровск".into()), ..Location::default() }],
//! );
//! let found = ix.suggest_restricted("мир", 5, &streets_of_khabarovsk);
//! let values: Vec<String> = found.iter().map(|s| ix.address(s).value()).collect();
//! assert_eq!(values, ["г Хабаровск, ул Мира"]);
//! ```

use crate::address::Address;
use crate::text::fold;

/// The kinds of entry an index holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kinds {
    /// Cities, towns, villages.
    pub places: bool,
    pub streets: bool,
    /// One house of a street.
    pub houses: bool,
}

/// Where an entry must be: every field given must equal the entry's.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Location {
    pub country_iso_code: Option<String>,
    pub country: Option<String>,
    pub region: Option<String>,
    /// The place's name (a city or a settlement).
    pub city: Option<String>,
    pub street: Option<String>,
}

impl Location {
    /// The words of the fields given, broadest first: what a query must
    /// also contain to find entries there (the engine adds them to drive
    /// its search from the place, see [`Restrict::words`]).
    fn words(&self) -> impl Iterator<Item = &str> {
        [&self.country, &self.region, &self.city, &self.street]
            .into_iter()
            .flatten()
            .map(String::as_str)
    }
}

/// A request's restriction; [`Restrict::default`] lets everything through.
#[derive(Clone, Debug, Default)]
pub struct Restrict {
    kinds: Option<Kinds>,
    /// Folded; an entry must be in one of them (none: anywhere).
    locations: Vec<Location>,
}

impl Restrict {
    /// Entries of `kinds` (all if `None`) in any one of `locations` (all
    /// if empty).
    pub fn new(kinds: Option<Kinds>, locations: Vec<Location>) -> Self {
        // `*` is any (DaData's `{"country_iso_code": "*"}`: every country),
        // and so is an empty value (a form field not filled in yet).
        fn given(s: &Option<String>) -> Option<&str> {
            s.as_deref()
                .map(str::trim)
                .filter(|s| !s.is_empty() && *s != "*")
        }
        let folded = |s: &Option<String>| given(s).map(fold);
        let locations: Vec<Location> = locations
            .iter()
            .map(|l| Location {
                country_iso_code: given(&l.country_iso_code).map(str::to_ascii_uppercase),
                country: folded(&l.country),
                region: folded(&l.region),
                city: folded(&l.city),
                street: folded(&l.street),
            })
            .collect();
        // One that is only `*`s is anywhere, and so is "any one of" them.
        let anywhere = locations.iter().any(|l| *l == Location::default());
        Self {
            kinds,
            locations: if anywhere { Vec::new() } else { locations },
        }
    }

    /// Whether everything passes.
    pub fn is_none(&self) -> bool {
        self.kinds.is_none() && self.locations.is_empty()
    }

    /// One restriction per location, when there are several: each is
    /// searched from its own place ([`Self::words`]) and the results
    /// merged, where one search over all would have to find them among
    /// everything the query matches.
    pub fn each_location(&self) -> Option<impl Iterator<Item = Restrict> + '_> {
        (self.locations.len() > 1).then(|| {
            self.locations.iter().map(|l| Restrict {
                kinds: self.kinds,
                locations: vec![l.clone()],
            })
        })
    }

    /// Words that every entry passing holds, to be searched with the
    /// query: the fields of the one location, if there is exactly one.
    pub fn words(&self) -> Vec<&str> {
        match &self.locations[..] {
            [only] => only.words().collect(),
            _ => Vec::new(),
        }
    }

    /// The country code of the one location, if it names no country:
    /// the engine then searches from the country's name.
    pub fn country_code_alone(&self) -> Option<&str> {
        match &self.locations[..] {
            [only] if only.country.is_none() => only.country_iso_code.as_deref(),
            _ => None,
        }
    }

    /// Whether the entry `a` passes.
    pub fn admits(&self, a: &Address) -> bool {
        let kind_ok = self.kinds.is_none_or(|k| match (a.street, a.house) {
            (_, Some(_)) => k.houses,
            (Some(_), None) => k.streets,
            (None, None) => k.places,
        });
        kind_ok && (self.locations.is_empty() || self.locations.iter().any(|l| at(l, a)))
    }
}

/// Whether `a` is at `l` (whose fields are folded).
fn at(l: &Location, a: &Address) -> bool {
    let same = |want: &Option<String>, have: Option<&str>| {
        want.as_ref()
            .is_none_or(|w| have.is_some_and(|h| fold(h.trim()) == *w))
    };
    l.country_iso_code.as_ref().is_none_or(|iso| {
        a.country_iso_code
            .is_some_and(|h| h.eq_ignore_ascii_case(iso))
    }) && same(&l.country, a.country)
        && same(&l.region, a.region)
        && same(&l.city, Some(a.city))
        && same(&l.street, a.street)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address<'a>(city: &'a str, street: Option<&'a str>, house: Option<&'a str>) -> Address<'a> {
        Address {
            country: Some("Россия"),
            country_iso_code: Some("RU"),
            region: Some("Хабаровский край"),
            city_type: Some("г"),
            city,
            street_type: street.map(|_| "ул"),
            street,
            house,
            postal_code: None,
            place_id: "gn:2",
            street_id: street.map(|_| "s:2"),
            geo: None,
        }
    }

    /// A location of one field: `at(|l| &mut l.city, "Москва")`.
    fn at(field: fn(&mut Location) -> &mut Option<String>, value: &str) -> Location {
        let mut l = Location::default();
        *field(&mut l) = Some(value.into());
        l
    }

    #[test]
    fn kinds_and_locations() {
        let city = address("Хабаровск", None, None);
        let street = address("Хабаровск", Some("Мира"), None);
        let house = address("Хабаровск", Some("Мира"), Some("3"));
        assert!(Restrict::default().admits(&house));
        let streets = Restrict::new(
            Some(Kinds {
                places: false,
                streets: true,
                houses: false,
            }),
            Vec::new(),
        );
        assert!(!streets.admits(&city) && streets.admits(&street) && !streets.admits(&house));
        let any_of = |locations: Vec<Location>| Restrict::new(None, locations);
        let khabarovsk = any_of(vec![at(|l| &mut l.city, " ХАБАРОВСК ")]);
        assert!(khabarovsk.admits(&street));
        assert!(!khabarovsk.admits(&address("Москва", Some("Мира"), None)));
        assert!(any_of(vec![at(|l| &mut l.country_iso_code, "ru")]).admits(&city));
        assert!(!any_of(vec![at(|l| &mut l.street, "мира")]).admits(&city));
        // Any one of several.
        let either = any_of(vec![
            at(|l| &mut l.city, "Москва"),
            at(|l| &mut l.region, "хабаровский край"),
        ]);
        assert!(either.admits(&house));
        assert_eq!(either.words(), Vec::<&str>::new());
        assert_eq!(khabarovsk.words(), ["хабаровск"]);
        // DaData's `*` is any, and so is an empty value; "any one of"
        // several with an anywhere among them is anywhere.
        assert!(any_of(vec![at(|l| &mut l.country_iso_code, "*")]).is_none());
        assert!(any_of(vec![at(|l| &mut l.city, " ")]).is_none());
        assert!(
            any_of(vec![
                at(|l| &mut l.city, "Москва"),
                at(|l| &mut l.country, "*")
            ])
            .is_none()
        );
        let iceland = any_of(vec![at(|l| &mut l.country_iso_code, "is")]);
        assert_eq!(iceland.country_code_alone(), Some("IS"));
        assert!(!iceland.admits(&city));
    }
}
