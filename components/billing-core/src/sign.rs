//! Payment signatures: `signing::row` (the one implementation the MariaDB
//! UDFs `edge_sign_row`/`edge_verify_row` use) over the columns `id,
//! client_id, amount_cents, currency, paid_at, reference`, in that order,
//! the integers as integers (`paid_at` in unix ms) and the strings as
//! their UTF-8 bytes. So, in MariaDB, with the same key in the UDF's key
//! file: `edge_verify_row('billing', signature, id, client_id,
//! amount_cents, currency, paid_at, reference)`.

use signing::row::{Column, sign_row, verify_row};

/// A payment's signed columns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Payment {
    /// Its id.
    pub id: i64,
    /// Its client.
    pub client_id: i64,
    /// Amount in cents.
    pub amount_cents: i64,
    /// ISO 4217 currency.
    pub currency: String,
    /// When paid, unix ms.
    pub paid_at: i64,
    /// The payer's reference.
    pub reference: String,
}

impl Payment {
    fn columns(&self) -> [Column<'_>; 6] {
        [
            Column::Int(self.id),
            Column::Int(self.client_id),
            Column::Int(self.amount_cents),
            Column::Str(self.currency.as_bytes()),
            Column::Int(self.paid_at),
            Column::Str(self.reference.as_bytes()),
        ]
    }

    /// The signature: 64 lower-case hex digits.
    pub fn sign(&self, key: &[u8]) -> String {
        sign_row(key, &self.columns())
    }

    /// Whether `signature` is this payment's.
    pub fn verify(&self, key: &[u8], signature: &str) -> bool {
        verify_row(key, &self.columns(), signature)
    }
}

/// The row key from its hex form (the `row_key` variable): at least 16 bytes.
pub fn parse_key(hex_key: &str) -> Result<Vec<u8>, String> {
    let key = hex::decode(hex_key.trim()).map_err(|e| format!("row_key is not hex: {e}"))?;
    if key.len() < 16 {
        return Err(format!("row_key has {} bytes; at least 16", key.len()));
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p() -> Payment {
        Payment {
            id: 7,
            client_id: 3,
            amount_cents: 1990,
            currency: "EUR".into(),
            paid_at: 1_700_000_000_000,
            reference: "INV-00000007".into(),
        }
    }

    #[test]
    fn signs_the_documented_columns() {
        let key = [1u8; 32];
        let sig = p().sign(&key);
        assert_eq!(sig.len(), 64);
        // The same as the row signature of those columns in that order.
        assert_eq!(
            sig,
            sign_row(
                &key,
                &[
                    Column::Int(7),
                    Column::Int(3),
                    Column::Int(1990),
                    Column::Str(b"EUR"),
                    Column::Int(1_700_000_000_000),
                    Column::Str(b"INV-00000007"),
                ]
            )
        );
        assert!(p().verify(&key, &sig));
        let mut tampered = p();
        tampered.amount_cents = 1;
        assert!(!tampered.verify(&key, &sig));
        assert!(!p().verify(&[2u8; 32], &sig));
        assert!(!p().verify(&key, "zz"));
    }

    #[test]
    fn keys() {
        assert_eq!(parse_key(&"ab".repeat(16)).unwrap(), vec![0xab; 16]);
        assert!(parse_key("abcd").is_err());
        assert!(parse_key("xyz").is_err());
    }
}
