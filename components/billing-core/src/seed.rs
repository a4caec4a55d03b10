//! Deterministic demo data: a seeded PRNG (SplitMix64), no clock and no
//! randomness source, so every run and both databases get the same rows.
//!
//! Part 0 is the tariffs, the dealers and the users; parts 1.. are the
//! clients in blocks of [`Plan::part_clients`], each with
//! [`Plan::payments_per_client`] payments. Every value of client `id` comes
//! from a generator seeded with `id` alone, so a client is the same
//! whatever the part size, and ids are fixed (client `id`'s payments are
//! `(id - 1) * payments_per_client + 1 ..`).

use crate::dates::{DAY_MS, days_from_civil};
use crate::sign::Payment;

/// The generator: SplitMix64.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// One of `items`.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

/// A tariff: name, monthly price in cents, active.
pub const TARIFFS: &[(&str, i64, bool)] = &[
    ("Start", 990, true),
    ("Basic", 1990, true),
    ("Business", 4990, true),
    ("Pro", 9990, true),
    ("Legacy", 1490, false),
];

/// The dealers' names (ids 1..=5).
pub const DEALERS: &[&str] = &[
    "Aurora Telecom",
    "Baltic Voice",
    "Cedar Networks",
    "Delta Conferencing",
    "Evergreen Systems",
];

/// How the dealers' clients are spread (weights, per dealer).
const DEALER_WEIGHTS: &[u64] = &[30, 25, 20, 15, 10];

/// The admin's login.
pub const ADMIN_LOGIN: &str = "admin@billing.test";

/// The users: login, role, dealer id.
pub fn users() -> Vec<(String, &'static str, Option<i64>)> {
    let mut out = vec![(ADMIN_LOGIN.to_string(), "admin", None)];
    for i in 1..=DEALERS.len() as i64 {
        out.push((format!("dealer{i}@billing.test"), "dealer", Some(i)));
    }
    out
}

/// When the demo's registrations start: 2024-01-01 (unix ms), and they
/// spread over two years.
pub const START_MS: i64 = days_from_civil(2024, 1, 1) * DAY_MS;
/// Days of registrations.
pub const SPAN_DAYS: u64 = 731;

const FIRST: &[&str] = &[
    "Anna", "Boris", "Clara", "Dmitri", "Elena", "Farid", "Greta", "Hugo", "Ines", "Jonas",
    "Katya", "Lars", "Marta", "Nikolai", "Olga", "Pavel", "Quinn", "Rosa", "Sergei", "Tanya",
    "Ulla", "Viktor", "Wanda", "Xenia", "Yuri", "Zoe",
];
const LAST: &[&str] = &[
    "Ivanova", "Petrov", "Schmidt", "Novak", "Larsen", "Moreau", "Rossi", "Kowalski", "Berg",
    "Horvat", "Silva", "Young", "Okafor", "Tanaka", "Nguyen", "Smirnova", "Keller", "Dubois",
];
const WORDS: &[&str] = &[
    "Amber", "Bright", "Copper", "Delta", "Echo", "Falcon", "Granite", "Harbor", "Iris", "Juniper",
    "Kite", "Lumen", "Maple", "Nova", "Orbit", "Pine", "Quartz", "River", "Summit", "Tundra",
    "Umbra", "Vertex", "Willow", "Zenith",
];
const KINDS: &[&str] = &[
    "Studio",
    "Labs",
    "Logistics",
    "Clinic",
    "Bakery",
    "Consulting",
    "Media",
    "Foods",
    "Legal",
    "Motors",
    "Academy",
    "Travel",
];
const SUFFIX: &[&str] = &["LLC", "Ltd", "GmbH", "Inc", "OOO", "AB"];
const NOTES: &[&str] = &[
    "",
    "",
    "",
    "Prefers e-mail",
    "Call after 14:00",
    "Annual invoice requested",
    "Second office in the north",
];

/// A demo client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Client {
    /// Its id.
    pub id: i64,
    /// Its dealer (1..=5).
    pub dealer_id: i64,
    /// Company name.
    pub name: String,
    /// Contact person.
    pub contact_name: String,
    /// Phone.
    pub phone: String,
    /// E-mail.
    pub email: String,
    /// Note.
    pub note: String,
    /// Tariff (an active one).
    pub tariff_id: i64,
    /// Registration, unix ms.
    pub registered_at: i64,
}

/// How much to make and in how many parts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Clients in all.
    pub clients: i64,
    /// Payments per client.
    pub payments_per_client: i64,
    /// Clients per part.
    pub part_clients: i64,
}

impl Plan {
    /// The demo: 100,000 clients, 1,000,000 payments, 1,000 clients (10,000
    /// payments) a part.
    pub const DEMO: Plan = Plan {
        clients: 100_000,
        payments_per_client: 10,
        part_clients: 1000,
    };

    /// The demo with `clients` clients (the `seed_scale` variable), parts of
    /// at most 1,000 clients and at least 4 parts when there are clients
    /// enough, so small test datasets still come in several parts.
    pub fn scaled(clients: i64) -> Plan {
        let clients = clients.clamp(0, 10_000_000);
        Plan {
            clients,
            payments_per_client: 10,
            part_clients: (clients / 4).clamp(1, 1000),
        }
    }

    /// Parts in all (part 0 included).
    pub fn parts(&self) -> i64 {
        1 + (self.clients + self.part_clients - 1) / self.part_clients
    }

    /// The client ids of part `part` (empty for part 0 and past the end).
    pub fn client_ids(&self, part: i64) -> std::ops::Range<i64> {
        if part < 1 || part >= self.parts() {
            return 0..0;
        }
        let start = (part - 1) * self.part_clients + 1;
        start..(start + self.part_clients).min(self.clients + 1)
    }

    /// Client `id`.
    pub fn client(&self, id: i64) -> Client {
        let mut r = Rng::new(0xB111_1A6E ^ (id as u64).wrapping_mul(0x2545_F491_4F6C_DD1D));
        let total: u64 = DEALER_WEIGHTS.iter().sum();
        let mut w = r.below(total);
        let mut dealer_id = 1;
        for (i, weight) in DEALER_WEIGHTS.iter().enumerate() {
            if w < *weight {
                dealer_id = i as i64 + 1;
                break;
            }
            w -= weight;
        }
        let first = *r.pick(FIRST);
        let last = *r.pick(LAST);
        let name = format!("{} {} {}", r.pick(WORDS), r.pick(KINDS), r.pick(SUFFIX));
        let phone = format!(
            "+{} ({:03}) {:03}-{:02}-{:02}",
            1 + r.below(49),
            r.below(1000),
            r.below(1000),
            r.below(100),
            r.below(100)
        );
        let email = format!(
            "{}.{}{}@example.com",
            first.to_ascii_lowercase(),
            last.to_ascii_lowercase(),
            id
        );
        let note = r.pick(NOTES).to_string();
        let active = TARIFFS.iter().filter(|t| t.2).count() as u64;
        let tariff_id = 1 + r.below(active) as i64;
        let registered_at =
            START_MS + r.below(SPAN_DAYS) as i64 * DAY_MS + r.below(DAY_MS as u64) as i64;
        Client {
            id,
            dealer_id,
            name,
            contact_name: format!("{first} {last}"),
            phone,
            email,
            note,
            tariff_id,
            registered_at,
        }
    }

    /// The payments of `client` (unsigned: sign them with the row key).
    pub fn payments(&self, client: &Client) -> Vec<Payment> {
        let mut r = Rng::new(0x9A7E_5EED ^ (client.id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let price = TARIFFS[client.tariff_id as usize - 1].1;
        (0..self.payments_per_client)
            .map(|k| {
                let id = (client.id - 1) * self.payments_per_client + k + 1;
                Payment {
                    id,
                    client_id: client.id,
                    amount_cents: price * (1 + r.below(3) as i64),
                    currency: "EUR".into(),
                    paid_at: client.registered_at
                        + k * 30 * DAY_MS
                        + r.below(3 * DAY_MS as u64) as i64,
                    reference: format!("INV-{id:08}"),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rng_is_fixed() {
        let mut r = Rng::new(0);
        // SplitMix64's published first outputs for seed 0.
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        let mut r = Rng::new(42);
        for _ in 0..1000 {
            assert!(r.below(7) < 7);
        }
    }

    #[test]
    fn demo_plan() {
        let p = Plan::DEMO;
        assert_eq!(p.parts(), 101);
        assert_eq!(p.client_ids(0), 0..0);
        assert_eq!(p.client_ids(1), 1..1001);
        assert_eq!(p.client_ids(100), 99_001..100_001);
        assert_eq!(p.client_ids(101), 0..0);
        assert_eq!(p.clients * p.payments_per_client, 1_000_000);
        assert_eq!(Plan::scaled(100_000), Plan::DEMO);
    }

    #[test]
    fn scaled_plans_cover_every_client_once() {
        for n in [0, 1, 3, 7, 40, 1001, 5000] {
            let p = Plan::scaled(n);
            let ids: Vec<i64> = (0..p.parts() + 2).flat_map(|k| p.client_ids(k)).collect();
            assert_eq!(ids, (1..=n).collect::<Vec<_>>(), "{n}");
            if n >= 4 {
                assert!(p.parts() >= 5, "{n}");
            }
        }
    }

    #[test]
    fn deterministic_and_valid() {
        let p = Plan::DEMO;
        let a = p.client(12_345);
        assert_eq!(a, Plan::scaled(20_000).client(12_345));
        assert_ne!(a, p.client(12_346));
        let mut per_dealer = [0usize; 5];
        let (mut min, mut max) = (i64::MAX, 0);
        for id in 1..=5000 {
            let c = p.client(id);
            per_dealer[c.dealer_id as usize - 1] += 1;
            assert!(crate::validate::name(&c.name, 200).is_ok());
            assert!(crate::validate::phone(&c.phone).is_ok(), "{}", c.phone);
            assert!(crate::validate::email(&c.email).is_ok(), "{}", c.email);
            assert!(TARIFFS[c.tariff_id as usize - 1].2);
            min = min.min(c.registered_at);
            max = max.max(c.registered_at);
            let pays = p.payments(&c);
            assert_eq!(pays.len(), 10);
            assert_eq!(pays[0].id, (id - 1) * 10 + 1);
            assert!(
                pays.iter()
                    .all(|x| x.paid_at >= c.registered_at && x.client_id == id)
            );
        }
        // Every dealer has clients, the first the most.
        assert!(per_dealer.iter().all(|&n| n > 300), "{per_dealer:?}");
        assert!(per_dealer[0] > per_dealer[4]);
        // Two years of registrations.
        assert!(min < START_MS + 10 * DAY_MS && max > START_MS + 720 * DAY_MS);
        assert_eq!(crate::dates::format_date(START_MS), "2024-01-01");
    }

    #[test]
    fn users_are_fixed() {
        let u = users();
        assert_eq!(u.len(), 6);
        assert_eq!(u[0], ("admin@billing.test".to_string(), "admin", None));
        assert_eq!(
            u[5],
            ("dealer5@billing.test".to_string(), "dealer", Some(5))
        );
    }
}
